//! Disjoint sets over `0..n`, for connected components of the match graph.

use std::collections::{HashMap, HashSet};

/// Union by size with path halving: near-constant time per operation, 8 bytes per node.
pub struct UnionFind {
    parent: Vec<u32>,
    size: Vec<u32>,
}

impl UnionFind {
    /// `n` singletons.
    pub fn new(n: usize) -> UnionFind {
        debug_assert!(n <= u32::MAX as usize);
        UnionFind {
            parent: (0..n as u32).collect(),
            size: vec![1; n],
        }
    }

    /// The root of `x`'s set.
    pub fn find(&mut self, mut x: u32) -> u32 {
        while self.parent[x as usize] != x {
            let grandparent = self.parent[self.parent[x as usize] as usize];
            self.parent[x as usize] = grandparent;
            x = grandparent;
        }
        x
    }

    /// Joins the sets of `a` and `b`.
    pub fn union(&mut self, a: u32, b: u32) {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        if self.size[ra as usize] < self.size[rb as usize] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb as usize] = ra;
        self.size[ra as usize] += self.size[rb as usize];
    }

    /// The members of every set for which `keep(root size, member)` holds for some member,
    /// each in increasing order, sets ordered by their smallest member.
    pub fn sets(&mut self, keep: impl Fn(u32, u32) -> bool) -> Vec<Vec<u32>> {
        let n = self.parent.len() as u32;
        // A set is kept when any member qualifies, so decide per root first.
        let mut kept = HashSet::new();
        for x in 0..n {
            let r = self.find(x);
            if keep(self.size[r as usize], x) {
                kept.insert(r);
            }
        }
        let mut label: HashMap<u32, usize> = HashMap::new();
        let mut out: Vec<Vec<u32>> = Vec::new();
        for x in 0..n {
            let r = self.find(x);
            if kept.contains(&r) {
                let id = *label.entry(r).or_insert_with(|| {
                    out.push(Vec::new());
                    out.len() - 1
                });
                out[id].push(x);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_sets() {
        let mut uf = UnionFind::new(6);
        uf.union(0, 3);
        uf.union(4, 3);
        uf.union(1, 5);
        assert_eq!(uf.find(4), uf.find(0));
        assert_ne!(uf.find(1), uf.find(0));
        assert_eq!(
            uf.sets(|size, _| size >= 2),
            vec![vec![0, 3, 4], vec![1, 5]]
        );
        assert_eq!(uf.sets(|_, x| x == 2), vec![vec![2]]);
    }
}
