//! The page around every view: one HTML document with its style and a few lines of
//! script inline (no file, font or library fetched: the view works offline), and the
//! one escape every text from a dataset or a model goes through.

/// `s` as HTML text or an attribute value: `&`, `<`, `>`, `"` and `'` escaped.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Fixed column widths and tabular figures keep a page from shifting as it fills; the
/// page never loads anything after it is drawn.
const STYLE: &str = "\
*{box-sizing:border-box}\
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}\
header{position:sticky;top:0;z-index:2;background:#24364b;color:#fff;padding:6px 16px;\
display:flex;gap:18px;align-items:center;min-height:38px}\
header a{color:#cfe3ff}header .run{font-weight:600}header .keys{margin-left:auto;font-size:12px;color:#b8c6d6}\
main{padding:10px 16px}\
a{color:#1f5fa8}\
form.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:end;margin:4px 0 10px}\
form.filters label{display:flex;flex-direction:column;font-size:12px;color:#555}\
form.filters select{font-size:13px;min-width:9em}\
table.list{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:12px;background:#fff}\
table.list th,table.list td{border-bottom:1px solid #e3e3e3;padding:2px 3px;text-align:right;white-space:nowrap}\
table.list th{position:sticky;top:38px;background:#eef1f5;font-weight:600}\
table.list td.text{text-align:left;white-space:normal;min-width:18em;max-width:26em;font-size:12px}table.list td.text div{display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:2;overflow:hidden}\
table.list td.key,table.list th.key{text-align:left}\
table.list tr.sel{outline:2px solid #1f5fa8}\
table.list th.mode{text-align:center;border-left:2px solid #c9d1db}\
table.list td.first,table.list th.first{border-left:2px solid #c9d1db}\
.bad{color:#b3261e}.good{color:#1b7a3a}.muted{color:#777}\
nav.pages{margin:8px 0;display:flex;gap:12px;align-items:center}\
section{margin:10px 0 16px}h1{font-size:18px;margin:6px 0}h2{font-size:15px;margin:14px 0 6px}\
.source{font-size:16px;background:#fff;border:1px solid #ddd;padding:8px 10px;border-radius:4px}\
mark.ent{background:#fff1b8;border-bottom:2px solid #d9a400;padding:0 1px}\
mark.ent.t2{background:#dcecff;border-bottom-color:#2f6fbf}\
mark.ent.lost{outline:2px dashed #b3261e}\
.modes{display:grid;gap:10px;align-items:start}\
.mode{background:#fff;border:1px solid #ddd;border-radius:4px;padding:6px 8px;min-width:0}\
.mode h3{margin:0 0 4px;font-size:14px}\
.figures{font-size:12px;color:#444;font-variant-numeric:tabular-nums}\
ol.claims{padding-left:1.6em;margin:6px 0}ol.claims li{margin:0 0 6px}\
li.added{background:#e7f6ea}\
.removed{background:#fde8e7;text-decoration:line-through;color:#7a2620}\
mark.boundary{background:#ffd6d2;border-bottom:2px solid #b3261e}\
.tag{display:inline-block;font-size:11px;border-radius:3px;padding:0 4px;margin:1px 3px 0 0;background:#eef1f5;color:#333}\
.tag.warn{background:#fde8e7;color:#8c1d18}.tag.ref{background:#e8f0fb;color:#1f4f8a}\
ins{background:#cdeed4;text-decoration:none}del{background:#f8cfcb}\
ul.steps{margin:4px 0;padding-left:1.3em;font-size:13px}\
pre{white-space:pre-wrap;word-break:break-word;background:#f3f3f3;border:1px solid #ddd;padding:6px;font-size:12px;max-height:22em;overflow:auto}\
details summary{cursor:pointer;font-size:13px}\
ol.refs{margin:4px 0}";

/// Keyboard use: `j` / `→` next, `k` / `←` previous, `u` back to the list; a changed
/// filter submits its form (the URL then holds the state, so the back button works).
const SCRIPT: &str = "\
document.addEventListener('keydown',function(e){\
if(e.target&&/^(INPUT|SELECT|TEXTAREA)$/.test(e.target.tagName))return;\
if(e.ctrlKey||e.metaKey||e.altKey)return;\
var k=e.key,rel=(k==='j'||k==='ArrowRight')?'next':(k==='k'||k==='ArrowLeft')?'prev':(k==='u')?'up':null;\
if(!rel)return;var a=document.querySelector('a[rel=\"'+rel+'\"]');if(a){e.preventDefault();location.href=a.href;}});\
document.querySelectorAll('form.filters select').forEach(function(s){s.addEventListener('change',function(){s.form.submit();});});";

/// A whole page: `title` (escaped here), the header's links (HTML) and the body (HTML).
pub fn page(title: &str, run: &str, header: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <header><span class=\"run\">credence view: {run}</span>{header}\
         <span class=\"keys\">keys: j/→ next · k/← previous · u list</span></header>\n\
         <main>\n{body}\n</main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        title = esc(title),
        run = esc(run),
    )
}

/// A number with `digits` decimals, or a muted dash when there is none.
pub fn figure(value: Option<f64>, digits: usize) -> String {
    match value {
        Some(v) if v.is_finite() => format!("{v:.digits$}"),
        _ => "<span class=\"muted\">—</span>".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_stays_text() {
        assert_eq!(
            esc("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
        let p = page("<b>", "r<i>", "", "");
        assert!(p.contains("<title>&lt;b&gt;</title>") && p.contains("r&lt;i&gt;"));
    }
}
