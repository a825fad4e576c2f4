//! The attribute ruler (SPEC §10): 1–2 token patterns over TAG, LOWER, DEP and
//! IS_SPACE that set POS and MORPH (and rewrite TAG/DEP of whitespace tokens).

use super::msgpack::Value;
use super::tokenizer::python_regex_to_rust;
use super::NlpError;
use fancy_regex::Regex;
use std::collections::HashMap;

const FILE: &str = "attribute_ruler/patterns";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Tag,
    Lower,
    Dep,
    IsSpace,
}

#[derive(Debug)]
enum Predicate {
    Equals(String),
    Bool(bool),
    In(Vec<String>),
    NotIn(Vec<String>),
    Regex(Regex),
}

/// One token spec: all its predicates must hold.
type TokenSpec = Vec<(Field, Vec<Predicate>)>;

#[derive(Debug)]
struct Pattern {
    rule: usize,
    tokens: Vec<TokenSpec>,
}

/// What a rule sets on the token at its `index`.
#[derive(Debug, Default)]
struct RuleAttrs {
    index: usize,
    pos: Option<String>,
    tag: Option<String>,
    dep: Option<String>,
    morph: Option<String>,
}

/// The token attributes the ruler reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulerToken<'a> {
    pub lower: &'a str,
    pub is_space: bool,
    pub tag: String,
    pub dep: String,
    pub pos: String,
    pub morph: String,
}

/// The compiled rules, with patterns indexed by the literal TAG of their first token.
#[derive(Debug)]
pub struct AttributeRuler {
    patterns: Vec<Pattern>,
    rules: Vec<RuleAttrs>,
    by_first_tag: HashMap<String, Vec<usize>>,
    any_first_tag: Vec<usize>,
}

fn bad(field: String, message: String) -> NlpError {
    NlpError::Format {
        file: FILE.into(),
        field,
        message,
    }
}

fn strings(v: &Value<'_>, field: &str) -> Result<Vec<String>, NlpError> {
    v.as_array()
        .and_then(|a| {
            a.iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| bad(field.to_string(), "expected a list of strings".into()))
}

fn predicates(v: &Value<'_>, field: &str) -> Result<Vec<Predicate>, NlpError> {
    match v {
        Value::Str(s) => Ok(vec![Predicate::Equals(s.to_string())]),
        Value::Bool(b) => Ok(vec![Predicate::Bool(*b)]),
        Value::Map(ops) => ops
            .iter()
            .map(|(op, arg)| match op.as_str() {
                Some("IN") => Ok(Predicate::In(strings(arg, field)?)),
                Some("NOT_IN") => Ok(Predicate::NotIn(strings(arg, field)?)),
                Some("REGEX") => {
                    let src = arg
                        .as_str()
                        .ok_or_else(|| bad(field.to_string(), "REGEX needs a string".into()))?;
                    Regex::new(&python_regex_to_rust(src))
                        .map(Predicate::Regex)
                        .map_err(|e| bad(field.to_string(), format!("bad regex {src:?}: {e}")))
                }
                _ => Err(bad(field.to_string(), format!("unsupported operator {op}"))),
            })
            .collect(),
        other => Err(bad(field.to_string(), format!("unsupported value {other}"))),
    }
}

impl AttributeRuler {
    /// Builds the ruler from the decoded `attribute_ruler/patterns` file.
    pub fn from_msgpack(data: &Value<'_>) -> Result<Self, NlpError> {
        let list = data
            .as_array()
            .ok_or_else(|| bad("(root)".into(), "expected a list of rules".into()))?;
        let mut patterns = Vec::new();
        let mut rules = Vec::new();
        for (r, rule) in list.iter().enumerate() {
            let field = format!("[{r}]");
            let mut attrs = RuleAttrs {
                index: rule
                    .get("index")
                    .and_then(Value::as_int)
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| bad(field.clone() + ".index", "missing".into()))?,
                ..RuleAttrs::default()
            };
            for (k, v) in rule.get("attrs").and_then(Value::as_map).unwrap_or(&[]) {
                let v = v.as_str().map(str::to_string);
                match k.as_str() {
                    Some("POS") => attrs.pos = v,
                    Some("TAG") => attrs.tag = v,
                    Some("DEP") => attrs.dep = v,
                    Some("MORPH") => attrs.morph = v,
                    _ => {} // LEMMA: the lemmatizer is out of scope.
                }
            }
            for pat in rule
                .get("patterns")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(field.clone() + ".patterns", "missing".into()))?
            {
                let mut tokens = Vec::new();
                for spec in pat.as_array().unwrap_or(&[]) {
                    let mut preds = Vec::new();
                    for (k, v) in spec.as_map().unwrap_or(&[]) {
                        let f = match k.as_str() {
                            Some("TAG") => Field::Tag,
                            Some("LOWER") => Field::Lower,
                            Some("DEP") => Field::Dep,
                            Some("IS_SPACE") => Field::IsSpace,
                            _ => return Err(bad(field.clone(), format!("unsupported key {k}"))),
                        };
                        preds.push((f, predicates(v, &field)?));
                    }
                    tokens.push(preds);
                }
                if attrs.index >= tokens.len() {
                    return Err(bad(field.clone(), "index beyond the pattern".into()));
                }
                patterns.push(Pattern { rule: r, tokens });
            }
            rules.push(attrs);
        }
        let mut by_first_tag: HashMap<String, Vec<usize>> = HashMap::new();
        let mut any_first_tag = Vec::new();
        for (i, p) in patterns.iter().enumerate() {
            let tag = p.tokens.first().and_then(|spec| {
                spec.iter().find_map(|(f, preds)| match (f, &preds[..]) {
                    (Field::Tag, [Predicate::Equals(t)]) => Some(t.clone()),
                    _ => None,
                })
            });
            match tag {
                Some(t) => by_first_tag.entry(t).or_default().push(i),
                None => any_first_tag.push(i),
            }
        }
        Ok(AttributeRuler {
            patterns,
            rules,
            by_first_tag,
            any_first_tag,
        })
    }

    fn holds(tok: &RulerToken<'_>, field: Field, preds: &[Predicate]) -> bool {
        let text = match field {
            Field::Tag => tok.tag.as_str(),
            Field::Lower => tok.lower,
            Field::Dep => tok.dep.as_str(),
            Field::IsSpace => {
                return preds
                    .iter()
                    .all(|p| matches!(p, Predicate::Bool(b) if *b == tok.is_space))
            }
        };
        preds.iter().all(|p| match p {
            Predicate::Equals(s) => s == text,
            Predicate::Bool(_) => false,
            Predicate::In(list) => list.iter().any(|s| s == text),
            Predicate::NotIn(list) => !list.iter().any(|s| s == text),
            Predicate::Regex(re) => re.is_match(text).unwrap_or(false),
        })
    }

    /// Finds all matches on the tokens as they are, then applies them in rule order.
    pub fn apply(&self, tokens: &mut [RulerToken<'_>]) {
        let n = tokens.len();
        let mut matches = Vec::new();
        for s in 0..n {
            let tagged = self
                .by_first_tag
                .get(&tokens[s].tag)
                .map_or(&[][..], Vec::as_slice);
            for &pi in tagged.iter().chain(&self.any_first_tag) {
                let p = &self.patterns[pi];
                let e = s + p.tokens.len();
                if e > n {
                    continue;
                }
                let ok = p.tokens.iter().zip(&tokens[s..e]).all(|(spec, tok)| {
                    spec.iter()
                        .all(|(field, preds)| Self::holds(tok, *field, preds))
                });
                if ok {
                    matches.push((p.rule, s, e));
                }
            }
        }
        matches.sort_unstable();
        matches.dedup();
        for (rule, s, _) in matches {
            let attrs = &self.rules[rule];
            let tok = &mut tokens[s + attrs.index];
            if let Some(v) = &attrs.pos {
                tok.pos.clone_from(v);
            }
            if let Some(v) = &attrs.tag {
                tok.tag.clone_from(v);
            }
            if let Some(v) = &attrs.dep {
                tok.dep.clone_from(v);
            }
            if let Some(v) = &attrs.morph {
                tok.morph.clone_from(v);
            }
        }
    }
}
