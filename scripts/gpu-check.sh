#!/usr/bin/env bash
# Builds, on a machine without a GPU, the bundle that checks Trident on one H100/H200 in under
# ten minutes, with no Rust toolchain on the GPU machine:
#
#   scripts/gpu-check.sh [OUT]     # build; OUT defaults to <cargo target dir>/gpu-check; also OUT.tar.xz
#   OUT/run.sh                     # on the GPU machine
#
# The bundle holds the release `trident` and `trident-coll` binaries (bin/), every test binary
# of the workspace that can run away from this machine (tests/), the tests' data and a text
# corpus (data/), the time model's predictions for H100 SXM and H200 (`trident bench kernels
# --device emu`), and run.sh, which runs, each phase within its own time limit:
#   a. the instruction self-test (`simt_selftest`) with TRIDENT_CUDA_SYNC=1 (synchronous
#      launches, so a fault names its kernel);
#   b. every other test binary with TRIDENT_REQUIRE_CUDA=1 (a test that finds no GPU fails);
#   c. `trident bench kernels --device cuda`, the predictions beside the measurements;
#   d. 50 iterations of GPT-2 124M in bf16 on --device cuda (tokens/s, MFU);
# and writes summary.json and summary.md whatever happened: each phase's status, and measured
# beside predicted for every kernel. Where no CUDA driver is found every phase says it skipped
# and why, and run.sh exits with status 2 (0: all passed; 1: something failed).
#
# glibc floor: every binary starts on glibc 2.28 and newer (Rocky/RHEL 8, Debian 10, Ubuntu
# 20.04). cargo-zigbuild links for the target `x86_64-unknown-linux-gnu.2.28` with `zig cc`
# against glibc 2.28's symbol versions (the build host's newer glibc is never linked); the
# script then reads every binary's dynamic symbol versions (`objdump -T`) and fails, naming the
# binary and the symbol, on any GLIBC_2.x newer than 2.28. It installs cargo-zigbuild (`cargo
# install`) and zig (the `ziglang` Python package) when they are missing, and says so. Build
# scripts and the kernels' PTX (a nested nightly cargo for nvptx64, which sees none of
# cargo-zigbuild's CARGO_* settings) are built for this machine as usual.
#
# Tests find what they need through variables run.sh sets to the bundle's own directories, so
# no path of this machine is needed there: TRIDENT_BIN_DIR (the `trident` and `trident-coll`
# they start) and TRIDENT_TEST_DATA (tests/data).
#
# GPU_CHECK_SKIP_PREDICT=1 leaves the predictions out (they take the emulator a few minutes);
# GPU_CHECK_NO_TARBALL=1 skips OUT.tar.xz. The artifacts are taken from wherever cargo puts
# them (CARGO_TARGET_DIR is respected).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
glibc_floor=2.28
target=x86_64-unknown-linux-gnu
zig_target=$target.$glibc_floor

target_dir=$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
out=${1:-$target_dir/gpu-check}
case "$out" in /*) ;; *) out=$(pwd)/$out ;; esac
rm -rf "$out" "$out.tar.xz"
mkdir -p "$out/bin" "$out/tests" "$out/data/tests" "$out/logs-build"
blog=$out/logs-build

# --- the tools: cargo-zigbuild and zig ----------------------------------------------------
if ! cargo-zigbuild --version >/dev/null 2>&1; then
    echo "cargo-zigbuild is missing: installing it (cargo install cargo-zigbuild --locked)"
    cargo install cargo-zigbuild --locked >"$blog/install-cargo-zigbuild.log" 2>&1 ||
        { tail -20 "$blog/install-cargo-zigbuild.log"; echo "error: could not install cargo-zigbuild" >&2; exit 1; }
fi
if ! command -v zig >/dev/null 2>&1 && ! python3 -m ziglang version >/dev/null 2>&1; then
    echo "zig is missing: installing it (python3 -m pip install ziglang; cargo-zigbuild runs python3 -m ziglang)"
    python3 -m pip install ziglang >"$blog/install-ziglang.log" 2>&1 ||
        python3 -m pip install --user ziglang >>"$blog/install-ziglang.log" 2>&1 ||
        { tail -20 "$blog/install-ziglang.log"; echo "error: could not install ziglang (pip)" >&2; exit 1; }
fi
echo "$(cargo-zigbuild --version), zig $(zig version 2>/dev/null || python3 -m ziglang version)"

# Lists what cargo built, from its JSON messages: kind, package, target, executable.
artifacts() {
    python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        # path+file:///dir/ops#trident-ops@0.1.0, or path+file:///dir/name#0.1.0
        url, _, frag = m["package_id"].partition("#")
        pkg = frag.split("@")[0] if "@" in frag else url.rstrip("/").split("/")[-1]
        test = "test" if m["profile"]["test"] else "run"
        print("\t".join([test, m["target"]["kind"][0], pkg, m["target"]["name"], m["executable"]]))
'
}

# --- the release binaries -----------------------------------------------------------------
echo "building the release binaries for $zig_target (cargo zigbuild; log: $blog/build-bins.log)"
cargo zigbuild --release --target "$zig_target" -p trident-cli -p trident-collectives --bins \
    --message-format=json 2>"$blog/build-bins.log" | artifacts >"$blog/bins.tsv" ||
    { tail -30 "$blog/build-bins.log"; exit 1; }
for bin in trident trident-coll; do
    exe=$(awk -F'\t' -v b="$bin" '$1 == "run" && $2 == "bin" && $4 == b {print $5}' "$blog/bins.tsv" | tail -1)
    [ -n "$exe" ] || { echo "error: cargo built no \`$bin\` binary (see $blog/build-bins.log)" >&2; exit 1; }
    cp "$exe" "$out/bin/$bin"
    strip --strip-all "$out/bin/$bin" 2>/dev/null || true
done

# --- the test binaries --------------------------------------------------------------------
# `cargo zigbuild --tests` is `cargo test --no-run` under zig's linker: each test target's
# executable is in the JSON messages. trident-ptx-builder's tests are left out at the build
# (see the filter below).
echo "building every test binary for $zig_target (release; log: $blog/build-tests.log)"
cargo zigbuild --release --target "$zig_target" --workspace --exclude trident-ptx-builder --tests \
    --message-format=json 2>"$blog/build-tests.log" | artifacts >"$blog/tests-all.tsv" ||
    { tail -30 "$blog/build-tests.log"; exit 1; }

# Tests that need this build machine, not a GPU, stay here; they run under `cargo test` on it:
# - trident-ptx-builder: drives rustup and the pinned nightly (one test fails on any machine
#   without rustup);
# - ptx, kernel_resources, gemm_tc_sass, memory_kernels_sass, ptx_collectives (trident) and ptxas
#   (custom-kernel): they run ptxas/cuobjdump, whose output is pinned to the CUDA toolkit
#   version installed here, and compare with files of this checkout.
excluded() {
    case "$1/$2" in
        trident-ptx-builder/*) return 0 ;;
        trident/ptx | trident/kernel_resources | trident/gemm_tc_sass | trident/memory_kernels_sass | trident/ptx_collectives) return 0 ;;
        custom-kernel/ptxas) return 0 ;;
    esac
    return 1
}
: >"$out/tests.tsv"
while IFS=$'\t' read -r test kind package name exe; do
    [ "$test" = test ] || continue
    if excluded "$package" "$name"; then
        echo "  left out (needs the build machine): $package/$name"
        continue
    fi
    # Integration tests keep their target name; unit tests (lib, bin) are named by package.
    case "$kind" in
        test) dest=$name ;;
        *) dest=$package-$kind-$name ;;
    esac
    [ -e "$out/tests/$dest" ] && dest=$package-$dest
    cp "$exe" "$out/tests/$dest"
    strip --strip-all "$out/tests/$dest" 2>/dev/null || true
    printf '%s\t%s\t%s\t%s\n' "$dest" "$package" "$kind" "$name" >>"$out/tests.tsv"
done <"$blog/tests-all.tsv"
[ -e "$out/tests/simt_selftest" ] || { echo "error: no simt_selftest test binary was built" >&2; exit 1; }

# --- glibc 2.28: every binary's symbol versions --------------------------------------------
echo "checking symbol versions: nothing newer than GLIBC_$glibc_floor"
bad=0
newest=0
for f in "$out"/bin/* "$out"/tests/*; do
    while read -r version symbol; do
        v=${version#GLIBC_}
        [ "$(printf '%s\n%s\n' "$v" "$newest" | sort -V | tail -1)" = "$v" ] && newest=$v
        if [ "$(printf '%s\n%s\n' "$v" "$glibc_floor" | sort -V | tail -1)" != "$glibc_floor" ]; then
            echo "error: ${f#"$out"/}: symbol $symbol needs GLIBC_$v (newer than $glibc_floor)" >&2
            bad=1
        fi
    done < <(objdump -T "$f" | awk '{ for (i = 1; i <= NF; i++) if (match($i, /GLIBC_[0-9][0-9.]*/)) print substr($i, RSTART, RLENGTH), $NF }' | sort -u)
done
[ $bad = 0 ] || exit 1
echo "  $(find "$out/bin" "$out/tests" -type f | wc -l) binaries; the newest version any of them needs: GLIBC_$newest"

# --- data ---------------------------------------------------------------------------------
cp -r tests/data/. "$out/data/tests/"
# A corpus for the training run: this checkout's Rust and Markdown text, about 4 MB, GPT-2
# tokenised by the binary itself.
find src data plan bench cli kernels runtime simt collectives perfmodel hardware docs \( -name '*.rs' -o -name '*.md' \) 2>/dev/null |
    sort | xargs cat | head -c 4000000 >"$out/data/corpus.txt"

# The cases `trident bench kernels` times, and their predictions (case, kernel, GPU, predicted
# ms, bound) for the summary, which lists every case even where nothing was measured.
"$out/bin/trident" bench kernels --list >"$out/data/cases.txt"
if [ "${GPU_CHECK_SKIP_PREDICT:-0}" != 1 ]; then
    echo "predicting every kernel on H100 SXM and H200 (emulator counters; log: $blog/predict.log)"
    "$out/bin/trident" bench kernels --device emu --gpu h100-sxm,h200 --json "$out/data/predicted.json" \
        >"$out/data/predicted.md" 2>"$blog/predict.log" || { tail -20 "$blog/predict.log"; exit 1; }
    python3 - "$out/data/predicted.json" >"$out/data/predicted.tsv" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    p = r.get("predicted_s")
    print("\t".join([r["case"], r.get("kernel", ""), r.get("gpu") or "", "%.4f" % (p * 1e3) if p else "-",
                     r.get("predicted_bound") or "-"]))
PY
else
    echo "GPU_CHECK_SKIP_PREDICT=1: no predictions in this bundle"
    : >"$out/data/predicted.tsv"
fi
{
    echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) for $zig_target; newest symbol version needed: GLIBC_$newest"
} >"$out/BUILD"

cp scripts/gpu-check-run.sh "$out/run.sh"
chmod +x "$out/run.sh"

if [ "${GPU_CHECK_NO_TARBALL:-0}" != 1 ]; then
    echo "packing $out.tar.xz"
    # One xz stream with a 64 MiB dictionary: the test binaries share most of their code.
    tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -9 -T1 >"$out.tar.xz"
fi
echo "collected $(wc -l <"$out/tests.tsv") test binaries in $out"
echo "bundle: $(du -sh "$out" | cut -f1) unpacked$([ -e "$out.tar.xz" ] && echo ", $(du -h "$out.tar.xz" | cut -f1) as $out.tar.xz")"
echo "on the GPU machine: tar xJf $(basename "$out").tar.xz && $(basename "$out")/run.sh"
