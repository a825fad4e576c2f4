//! What a mode changed against the base claims: a longest-common-subsequence diff of two
//! claim lists, and of two claims' words (claim lists are short, so the quadratic table
//! costs nothing).

/// One step of a diff of `a` into `b`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// `a[i]` equals `b[j]`.
    Same(usize, usize),
    /// `a[i]` is gone.
    Removed(usize),
    /// `b[j]` is new.
    Added(usize),
}

/// The edits that turn `a` into `b`, in order, keeping a longest common subsequence.
pub fn diff<T: PartialEq>(a: &[T], b: &[T]) -> Vec<Edit> {
    let (n, m) = (a.len(), b.len());
    // lcs[i][j]: the longest common subsequence of a[i..] and b[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(n.max(m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Edit::Same(i, j));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push(Edit::Added(j));
            j += 1;
        } else {
            out.push(Edit::Removed(i));
            i += 1;
        }
    }
    out
}

/// `to` against `from` word by word as HTML: new words in `<ins>`, gone ones in `<del>`,
/// every word escaped.
pub fn words_html(from: &str, to: &str) -> String {
    let a: Vec<&str> = from.split_whitespace().collect();
    let b: Vec<&str> = to.split_whitespace().collect();
    diff(&a, &b)
        .into_iter()
        .map(|e| match e {
            Edit::Same(_, j) => super::page::esc(b[j]),
            Edit::Added(j) => format!("<ins>{}</ins>", super::page::esc(b[j])),
            Edit::Removed(i) => format!("<del>{}</del>", super::page::esc(a[i])),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_is_one_claim_removed_and_two_added() {
        let base = ["A and B.", "C."];
        let repaired = ["A.", "B.", "C."];
        assert_eq!(
            diff(&base, &repaired),
            vec![
                Edit::Added(0),
                Edit::Added(1),
                Edit::Removed(0),
                Edit::Same(1, 2)
            ]
        );
        assert_eq!(
            words_html("It rose <fast>.", "Sales rose <fast>."),
            "<ins>Sales</ins> <del>It</del> rose &lt;fast&gt;."
        );
    }
}
