//! Source locations as 16-bit ids, so shadow entries stay small.

use std::collections::HashMap;
use std::panic::Location;

use crate::error::Site;

/// Id handed out once the table is full (a kernel with more than 65 534 distinct shared-memory
/// access sites): race reports then point at this file instead of the kernel line.
const OVERFLOW: u16 = u16::MAX;

const CACHE_SLOTS: usize = 256;

/// Interns sites; a direct-mapped cache in front of the map makes repeat lookups cheap.
pub(crate) struct SiteTable {
    sites: Vec<Site>,
    ids: HashMap<usize, u16>,
    cache: [(usize, u16); CACHE_SLOTS],
    overflow: Site,
}

impl SiteTable {
    pub fn new() -> Self {
        SiteTable {
            sites: Vec::new(),
            ids: HashMap::new(),
            cache: [(0, 0); CACHE_SLOTS],
            overflow: Location::caller(),
        }
    }

    pub fn id(&mut self, site: Site) -> u16 {
        let key = std::ptr::from_ref(site) as usize;
        let slot = (key >> 3) % CACHE_SLOTS;
        if self.cache[slot].0 == key {
            return self.cache[slot].1;
        }
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None if self.sites.len() < usize::from(OVERFLOW) => {
                let id = self.sites.len() as u16;
                self.sites.push(site);
                self.ids.insert(key, id);
                id
            }
            None => OVERFLOW,
        };
        self.cache[slot] = (key, id);
        id
    }

    pub fn site(&self, id: u16) -> Site {
        self.sites.get(usize::from(id)).copied().unwrap_or(self.overflow)
    }
}
