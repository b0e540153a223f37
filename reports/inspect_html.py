"""`spillage inspect SESSION --html FILE`: the timeline as one self-contained page.

Filters by category and observer; clicking an event (or an action's "records") shows the raw
records it rests on in the side panel. Every captured string goes through `escape` and is placed
as text; the page's one inline script reads only data-* attributes and moves existing nodes, never
writing markup, so a captured `<script>` shows as text."""

import json
from html import escape

from spillage.audit.model import CATEGORIES
from spillage.reports.timeline import Timeline
from spillage.reports.timeline import body_text
from spillage.reports.timeline import excerpt
from spillage.reports.timeline import match_spans
from spillage.reports.timeline import sent_strings

SHOW = 1000  # characters of a sent string shown around its first match
NO_LEAK = "none"
SHOWN_FIELDS = ("kind", "seq", "ts", "prev", "hash", "v", "headers", "body", "method", "url", "status", "reason")

STYLE = """body{font-family:sans-serif;margin:0;color:#222;font-size:14px}
header{padding:1em 1.5em;border-bottom:1px solid #ccc}header p{margin:.3em 0}
.ok{color:#196f3d;font-weight:bold}.fail{color:#b03a2e;font-weight:bold}
#filters{padding:.5em 1.5em;background:#f6f6f6;border-bottom:1px solid #ccc}#filters fieldset{display:inline;border:0}
.layout{display:flex}#timeline{flex:1;margin:0;padding:.5em 1.5em 2em 3.5em}
aside{width:44%;border-left:1px solid #ccc;padding:0 1em;position:sticky;top:0;height:100vh;overflow:auto}
.action{margin:.6em 0;padding:.3em .5em;border-left:3px solid #ddd}.action.leaky{border-left-color:#c0392b}
.head{font-family:monospace}.sent{font-family:monospace;margin:.2em 0 .2em 1em;word-break:break-all}
mark{background:#f9e79f;font-weight:bold}.seqs{color:#777;font-size:12px}
button{font:inherit;cursor:pointer;margin:.15em 0 .15em 1em;text-align:left;border:1px solid #bbb;background:#fff}
button.selected{outline:2px solid #1f618d}.C_E{color:#c0392b}.C_I{color:#8e44ad}.B_E{color:#1f618d}.B_I{color:#138d90}
.record{border:1px solid #ddd;margin:.6em 0;padding:.4em}.record h3{font-size:13px;margin:0 0 .3em}
.record pre{white-space:pre-wrap;word-break:break-all;background:#fafafa;margin:.2em 0;font-size:12px}"""

SCRIPT = """(function(){
const boxes=[...document.querySelectorAll('#filters input')];
const count=document.getElementById('count');
function picked(name){return new Set(boxes.filter(b=>b.name===name&&b.checked).map(b=>b.value));}
function apply(){
  const cats=picked('category'),obs=picked('observer');let shown=0;
  for(const li of document.querySelectorAll('.action')){
    const seen=li.dataset.observers.split(' ').some(o=>obs.has(o));
    const events=[...li.querySelectorAll('.event')];let visible=0;
    for(const ev of events){
      const on=cats.has(ev.dataset.category)&&ev.dataset.observers.split(' ').some(o=>obs.has(o));
      ev.hidden=!on;if(on)visible++;
    }
    li.hidden=!(seen&&(events.length?visible>0:cats.has('none')));if(!li.hidden)shown++;
  }
  count.textContent=shown;
}
boxes.forEach(b=>b.addEventListener('change',apply));
document.getElementById('timeline').addEventListener('click',e=>{
  const button=e.target.closest('button[data-seqs]');if(!button)return;
  document.querySelectorAll('button.selected').forEach(b=>b.classList.remove('selected'));
  button.classList.add('selected');
  const nodes=button.dataset.seqs.split(' ').map(s=>document.getElementById('r'+s)).filter(Boolean).map(n=>{
    const copy=n.cloneNode(true);copy.removeAttribute('id');copy.hidden=false;return copy;});
  document.getElementById('shown').replaceChildren(...nodes);
  document.getElementById('panel-title').textContent=button.dataset.title;
});
apply();
})();"""


def marked(text: str, matches: list[str]) -> str:
    """`text` escaped, an excerpt around the matches, each match in <mark>."""
    return "".join(f"<mark>{escape(piece)}</mark>" if hit else escape(piece)
                   for piece, hit in match_spans(excerpt(text, matches, SHOW), matches))


def header(timeline: Timeline) -> str:
    check, audit, summary = timeline.check, timeline.audit, timeline.audit["summary"]
    occurrences = ", ".join(f"{c} {n}" for c, n in summary["occurrences"].items())
    status, label = ("ok", "chain OK") if check.ok else ("fail", "chain FAILED")
    return (f"<header><p class='{status}'>{label}: {escape(check.summary())}</p>"
            f"<p>session <b>{escape(audit['session'])}</b>, scenario {escape(audit['scenario'])}, site "
            f"{escape(audit['site'])}, judge {escape(audit['judge'])} ({escape(timeline.audit_source)})</p>"
            f"<p>actions {summary['actions']}, events {sum(summary['occurrences'].values())} ({occurrences}), "
            f"OR {summary['oversharing_rate']}, task {'succeeded' if summary['task_success'] else 'not completed'}"
            f"</p>{observer_table(audit)}</header>")


def observer_table(audit: dict) -> str:
    """Who observed what: domain, party, organisation (audit.json's observers)."""
    rows = "".join(f"<tr><td>{escape(o['observer'])}</td><td>{escape(o['domain'])}</td><td>{o['party']}</td>"
                   f"<td>{escape(o['organisation'] or '')}</td><td>{escape(', '.join(o['received']['attributes']))}</td></tr>"
                   for o in audit.get("observers") or ())
    return (f"<table class='observers'><tr><th>observer</th><th>domain</th><th>party</th><th>organisation</th>"
            f"<th>received</th></tr>{rows}</table>") if rows else ""


def filters(timeline: Timeline) -> str:
    observers = sorted({o for a in timeline.audit["actions"] for o in a["observers"]})

    def box(name: str, value: str, label: str) -> str:
        return f"<label><input type='checkbox' name='{name}' value='{escape(value)}' checked> {escape(label)}</label> "

    return ("<form id='filters'><fieldset><legend>category</legend>"
            + "".join(box("category", c, c) for c in CATEGORIES) + box("category", NO_LEAK, "actions without leaks")
            + "</fieldset><fieldset><legend>observer</legend>" + "".join(box("observer", o, o) for o in observers)
            + "</fieldset> <span id='count'></span> actions shown</form>")


def seqs_attribute(timeline: Timeline, seqs: list[int]) -> str:
    return " ".join(str(r["seq"]) for r in timeline.exchange(seqs))


def action_item(timeline: Timeline, action: dict) -> str:
    events = timeline.events_of(action["n"])
    matches = [e["matched"] for e in events]
    seconds = timeline.seconds(action["seq"])
    when = f"+{seconds:.1f}s" if seconds is not None else "?"
    parts = [f"<li class='action{' leaky' if events else ''}' data-observers='{escape(' '.join(action['observers']))}'>"
             f"<div class='head'>{when} #{action['n']} {escape(action['kind'])}/{escape(action['what'])} "
             f"{escape(action['channel'])} · {escape(', '.join(action['observers']))}</div>"]
    parts += [f"<div class='sent'>{escape(label)}: {marked(value, matches)}</div>" for label, value in sent_strings(action)]
    for e in events:
        observers = e["observers"] or action["observers"]
        title = f"{e['category']} {e['attribute']} (action #{action['n']})"
        parts.append(f"<button class='event {e['category']}' data-category='{e['category']}' "
                     f"data-observers='{escape(' '.join(observers))}' data-seqs='{seqs_attribute(timeline, e['evidence'])}' "
                     f"data-title='{escape(title)}'><b>{e['category']}</b> {escape(e['attribute'])}: matched "
                     f"<mark>{escape(e['matched'])}</mark> · {escape(', '.join(observers))} · seq {e['seq']}</button>")
    parts.append(f"<button class='records' data-seqs='{seqs_attribute(timeline, action['evidence'])}' "
                 f"data-title='records of action #{action['n']}'>records</button> "
                 f"<span class='seqs'>seqs {' '.join(map(str, action['evidence']))}</span></li>")
    return "".join(parts)


def record_section(timeline: Timeline, record: dict) -> str:
    """One raw record: its line, headers, body (escaped, long text cut) and other fields as JSON."""
    line = " ".join(str(record[k]) for k in ("method", "url", "status", "reason") if record.get(k) not in (None, ""))
    headers = "\n".join(f"{name}: {value}" for name, value in record.get("headers") or [])
    rest = {k: v for k, v in record.items() if k not in SHOWN_FIELDS}
    parts = [f"<section class='record' id='r{record['seq']}' hidden><h3>seq {record['seq']} · {escape(record['kind'])}"
             f" · {escape(record['ts'])}</h3>"]
    if line:
        parts.append(f"<pre>{escape(line)}</pre>")
    if headers:
        parts.append(f"<pre>{escape(headers)}</pre>")
    if "body" in record:
        parts.append(f"<pre>{escape(body_text(timeline.folder, record['body']))}</pre>")
    if rest:
        parts.append(f"<pre>{escape(json.dumps(rest, indent=1, ensure_ascii=False))}</pre>")
    return "".join(parts) + "</section>"


def timeline_html(timeline: Timeline) -> str:
    """The whole page."""
    actions = "".join(action_item(timeline, a) for a in timeline.audit["actions"])
    store = "".join(record_section(timeline, r) for _, r in sorted(timeline.records.items()))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>inspect {escape(timeline.audit['session'])}</title><style>{STYLE}</style></head><body>"
            f"{header(timeline)}{filters(timeline)}<div class='layout'><ol id='timeline'>{actions}</ol>"
            f"<aside><h2 id='panel-title'>Records</h2><div id='shown'><p>Click an event or “records” to see the "
            f"raw records it rests on.</p></div></aside></div><div hidden>{store}</div>"
            f"<script>{SCRIPT}</script></body></html>\n")
