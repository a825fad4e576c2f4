//! Tree post-processing after parsing (SPEC §8.5–8.6): spaCy's
//! `set_children_from_heads` (edges and sentence starts) and pseudo-projective
//! decoding of `label||head_label` arcs.

/// Left/right subtree edges and sentence starts of a tree given absolute heads
/// (a root is its own head).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edges {
    pub left: Vec<usize>,
    pub right: Vec<usize>,
    pub sent_start: Vec<bool>,
}

/// spaCy's `set_children_from_heads`: up to 12 edge-propagation passes, then one
/// sentence start at the left edge of every root.
pub fn set_children_from_heads(heads: &[usize]) -> Edges {
    let n = heads.len();
    let mut left: Vec<usize> = (0..n).collect();
    let mut right: Vec<usize> = (0..n).collect();
    for _ in 0..12 {
        if edge_pass(heads, &mut left, &mut right) {
            break;
        }
    }
    let mut sent_start = vec![false; n];
    for i in 0..n {
        if heads[i] == i {
            sent_start[left[i]] = true;
        }
    }
    Edges {
        left,
        right,
        sent_start,
    }
}

fn edge_pass(heads: &[usize], left: &mut [usize], right: &mut [usize]) -> bool {
    let n = heads.len();
    for i in 0..n {
        let h = heads[i];
        left[h] = left[h].min(left[i]);
        right[h] = right[h].max(right[i]);
    }
    for i in (0..n).rev() {
        let h = heads[i];
        right[h] = right[h].max(right[i]);
        left[h] = left[h].min(left[i]);
    }
    let mut is_start = vec![false; n];
    for i in 0..n {
        if heads[i] == i {
            is_start[left[i]] = true;
        }
    }
    let mut cur = 0;
    for (i, &starts) in is_start.iter().enumerate() {
        if (i > 0 && starts) || i + 1 == n {
            if (cur..i).any(|j| heads[j] < cur || heads[j] > i) {
                return false;
            }
            cur = i;
        }
    }
    true
}

/// Re-attaches every token whose label is `label||head_label` to the first token with
/// label `head_label` found breadth-first below its current head (children in order,
/// edges computed once before the loop), and strips the decoration. Returns the
/// final sentence starts.
pub fn deprojectivize(heads: &mut [usize], deps: &mut [String], is_space: &[bool]) -> Vec<bool> {
    let n = heads.len();
    let edges = set_children_from_heads(heads);
    for i in 0..n {
        let Some((new_label, head_label)) = deps[i]
            .split_once("||")
            .map(|(a, b)| (a.to_string(), b.to_string()))
        else {
            continue;
        };
        let mut queue = vec![heads[i]];
        let mut found = None;
        'search: while !queue.is_empty() {
            let mut next = Vec::new();
            for &q in &queue {
                let children = (edges.left[q]..q).chain(q + 1..=edges.right[q].min(n - 1));
                for c in children {
                    if heads[c] != q || is_space[c] || c == i {
                        continue;
                    }
                    if deps[c] == head_label {
                        found = Some(c);
                        break 'search;
                    }
                    next.push(c);
                }
            }
            queue = next;
        }
        if let Some(h) = found {
            heads[i] = h;
        }
        deps[i] = new_label;
    }
    set_children_from_heads(heads).sent_start
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentences_are_root_subtrees() {
        // "A b . C d ." as two trees rooted at 1 and 4.
        let heads = [1, 1, 1, 4, 4, 4];
        let e = set_children_from_heads(&heads);
        assert_eq!(e.sent_start, vec![true, false, false, true, false, false]);
        assert_eq!(e.left[4], 3);
        assert_eq!(e.right[1], 2);
    }

    #[test]
    fn decorated_label_moves_to_the_named_child() {
        // 0 <- 1 (root) -> 2 (dobj); token 3 is "prep||dobj" attached to the root.
        let mut heads = [1, 1, 1, 1];
        let mut deps: Vec<String> = ["nsubj", "ROOT", "dobj", "prep||dobj"]
            .map(String::from)
            .to_vec();
        deprojectivize(&mut heads, &mut deps, &[false; 4]);
        assert_eq!(heads, [1, 1, 1, 2]);
        assert_eq!(deps[3], "prep");
    }
}
