"""Loads a Trident export with Hugging Face `transformers` as GPT2LMHeadModel and checks that
its logits equal Trident's on the same tokens (written by `examples/03-export.rs`).

    python3 scripts/check_hf_export.py OUT_DIR
"""

import json
import sys

import torch
from transformers import GPT2LMHeadModel

out = sys.argv[1]
model = GPT2LMHeadModel.from_pretrained(f"{out}/hf").eval()
ref = json.load(open(f"{out}/logits.json"))
with torch.no_grad():
    logits = model(torch.tensor([ref["tokens"]])).logits[0]
want = torch.tensor(ref["logits"])
err = (logits - want).abs().max().item() / want.abs().max().item()
print(f"transformers loaded {out}/hf; max relative logit difference to Trident: {err:.2e}")
sys.exit(0 if err < 1e-4 else 1)
