"""`spillage inspect SESSION --html FILE`: the timeline as one self-contained page.

One column that reads at any width from 800 px: text wraps between words (URLs also after / ? & =
+ , ;), a match never. Filters by category and observer. Clicking an event opens, under it, the
record that proves it with the matched bytes marked, the piece of the request they were decoded
from, and its inclusion proof to download; "records" opens all the records of an action. Every
captured string goes through `escape` and is placed as text; the only URLs are data: URLs of
proofs made here; the page's one inline script reads only data-* attributes and moves existing
nodes, never writing markup, so a captured `<script>` shows as text."""

import re
from html import escape

from spillage.audit.model import CATEGORIES
from spillage.reports.event_evidence import EventEvidence
from spillage.reports.event_evidence import event_evidence
from spillage.reports.event_evidence import matched_forms
from spillage.reports.proof_links import ProofLinks
from spillage.reports.proof_links import proof_links
from spillage.reports.timeline import Timeline
from spillage.reports.timeline import chain_status
from spillage.reports.timeline import excerpt
from spillage.reports.timeline import match_spans
from spillage.reports.timeline import record_blocks
from spillage.reports.timeline import sent_strings

SHOW = 1000  # characters of a sent string shown around its first match
LONG_MATCH = 40  # characters: a longer match may wrap (at 800 px a shorter one always fits a line)
NO_LEAK = "none"
BREAKS = re.compile(r"(?<=[/?&=+,;])")  # where a URL may wrap, besides spaces

STYLE = """body{font-family:sans-serif;margin:0 auto;padding:0 1.5em 3em;max-width:75em;color:#222;font-size:14px;
overflow-wrap:anywhere}
header{padding:.8em 0;border-bottom:1px solid #ccc}header p{margin:.3em 0}
.ok{color:#196f3d;font-weight:bold}.fail{color:#b03a2e;font-weight:bold}
#filters{padding:.4em 0;border-bottom:1px solid #ccc;display:flex;flex-wrap:wrap;gap:0 1.5em;align-items:center}
#filters fieldset{border:0;margin:0;padding:.2em 0}#filters legend{float:left;margin-right:.5em;color:#555}
#timeline{list-style:none;margin:0;padding:0}
.action{margin:.6em 0;padding:.3em .6em;border-left:3px solid #ddd}.action.leaky{border-left-color:#c0392b}
.head,.sent,code,pre{font-family:monospace}.sent{margin:.2em 0 .2em 1em}
mark{background:#f9e79f;font-weight:bold;white-space:nowrap}mark.long{white-space:normal}
.wire{text-decoration:underline dotted #b7950b}.seqs{color:#777;font-size:12px}
button{font:inherit;cursor:pointer;margin:.15em 0 .15em 1em;text-align:left;border:1px solid #bbb;background:#fff;
max-width:calc(100% - 1em)}
button.selected{outline:2px solid #1f618d}.C_E{color:#c0392b}.C_I{color:#8e44ad}.B_E{color:#1f618d}.B_I{color:#138d90}
.proof,.records{margin:.3em 0 .6em 1em;padding:.4em .6em;background:#fbfbfb;border:1px solid #ddd}
.proof p{margin:.3em 0}.record{border:1px solid #ddd;margin:.5em 0;padding:.4em;background:#fff}
.record.current{outline:3px solid #f1c40f;animation:flash 1.5s}@keyframes flash{from{background:#fcf3cf}}
.record h3{font-size:13px;margin:0 0 .3em}
.record pre{white-space:pre-wrap;background:#fafafa;margin:.2em 0;font-size:12px}
.observers{border-collapse:collapse;margin:.4em 0;max-width:100%}.observers th,.observers td{text-align:left;
padding:.1em .8em .1em 0;vertical-align:top}"""

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
function select(button){
  document.querySelectorAll('button.selected').forEach(b=>b.classList.remove('selected'));
  button.classList.add('selected');
}
function show(box,target){
  box.hidden=false;
  document.querySelectorAll('.record.current').forEach(r=>r.classList.remove('current'));
  const record=target.closest('.record');if(record)record.classList.add('current');
  target.scrollIntoView({block:'center'});
}
boxes.forEach(b=>b.addEventListener('change',apply));
document.getElementById('timeline').addEventListener('click',e=>{
  const button=e.target.closest('button');if(!button)return;
  const box=button.nextElementSibling;
  if(!box.hidden){box.hidden=true;button.classList.remove('selected');return;}
  select(button);
  if(button.dataset.seqs!==undefined&&!box.childElementCount){
    box.replaceChildren(...button.dataset.seqs.split(' ').map(s=>document.getElementById('r'+s)).filter(Boolean)
      .map(n=>{const copy=n.cloneNode(true);copy.removeAttribute('id');copy.hidden=false;return copy;}));
  }
  show(box,box.querySelector('.proving mark.match')||box.querySelector('.proving')||box);
});
apply();
})();"""


def wrappable(text: str) -> str:
    """`text` escaped, with a line-break opportunity after each URL separator."""
    return "<wbr>".join(escape(piece) for piece in BREAKS.split(text))


def mark(text: str, kind: str = "match") -> str:
    return f"<mark class='{kind}{' long' if len(text) > LONG_MATCH else ''}'>{escape(text)}</mark>"


def marked(text: str, matches: list[str]) -> str:
    """`text` escaped and wrappable, each case-insensitive occurrence of `matches` in a <mark>."""
    return "".join(mark(piece) if hit else wrappable(piece) for piece, hit in match_spans(text, matches))


def on_wire(text: str, raw: str, forms: list[str]) -> str:
    """`text` with the decoded piece's wire value `raw` underlined and the match forms marked in it."""
    spans = match_spans(text, [raw]) if len(raw) > 1 else [(text, False)]
    return "".join(f"<span class='wire'>{marked(piece, forms)}</span>" if hit else marked(piece, forms)
                   for piece, hit in spans)


def header(timeline: Timeline) -> str:
    audit, summary = timeline.audit, timeline.audit["summary"]
    ok, said = chain_status(timeline.check)
    occurrences = ", ".join(f"{c} {n}" for c, n in summary["occurrences"].items())
    return (f"<header><p class='{'ok' if ok else 'fail'}'>chain {'OK' if ok else 'FAILED'}: {wrappable(said)}</p>"
            f"<p>session <b>{escape(audit['session'])}</b>, scenario {escape(audit['scenario'])}, site "
            f"{escape(audit['site'])}, judge {escape(audit['judge'])} ({escape(timeline.audit_source)})</p>"
            f"<p>actions {summary['actions']}, events {sum(summary['occurrences'].values())} ({occurrences}), "
            f"OR {summary['oversharing_rate']}, task {'succeeded' if summary['task_success'] else 'not completed'}. "
            f"Click an event for the record that proves it and its inclusion proof "
            f"(<code>spillage verify-proof FILE</code> checks it).</p>"
            f"{observer_table(audit)}</header>")


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
            + "</fieldset><span><span id='count'></span> actions shown</span></form>")


def record_section(timeline: Timeline, record: dict, forms: list[str] = (), raw: str = "", proving: bool = False,
                   stored: bool = False) -> str:
    """One raw record, escaped, long bodies cut around the match; `forms` marked, `raw` underlined; a
    `stored` one hidden under its id, for the "records" button to copy."""
    title = f"seq {record['seq']} · {escape(record['kind'])} · {escape(record['ts'])}"
    blocks = "".join(f"<pre>{on_wire(block, raw, forms)}</pre>" for block in record_blocks(timeline.folder, record, forms))
    css = "record proving" if proving else "record"
    stored_as = f" id='r{record['seq']}' hidden" if stored else ""
    return f"<section class='{css}'{stored_as}><h3>{title}</h3>{blocks}</section>"


def decoding(evidence: EventEvidence, matches: list[str]) -> str:
    """Where in the request the match was and the decodings that revealed it, outermost first."""
    piece = evidence.piece
    if piece is None:
        return ""
    steps = " → ".join(escape(d) for d in piece.decodings) or "none"
    return (f"<p>in <code>{escape(piece.where)}</code>, decoded ({steps}): "
            f"<code>{marked(excerpt(piece.text, matches, SHOW), matches)}</code></p>")


def proof_download(timeline: Timeline, seq: int, links: ProofLinks) -> str:
    url = links.url(seq)
    if url is None:
        return f"<p>No inclusion proof of seq {seq}: {escape(links.why)}.</p>"
    name = f"{timeline.audit['session']}-seq{seq}.proof.json"
    return (f"<p><a class='download' download='{escape(name)}' href='{url}'>inclusion proof of seq {seq}</a> "
            f"(spillage-proof, as <code>spillage prove SESSION --seq {seq}</code> writes it)</p>")


def event_item(timeline: Timeline, action: dict, event: dict, evidence: EventEvidence, links: ProofLinks) -> str:
    """An event's button and, hidden under it, what proves it."""
    observers = event["observers"] or action["observers"]
    raw = evidence.piece.raw if evidence.piece else ""
    proving = timeline.records.get(evidence.seq)
    found = "" if evidence.found else (f"<p>No form of “{escape(event['matched'])}” is on the wire: the judge read "
                                        f"it from what the action chose ({escape(action['text'])}).</p>")
    carriers = [timeline.records[s] for s in evidence.carriers]
    return (f"<div class='event' data-category='{event['category']}' data-observers='{escape(' '.join(observers))}'>"
            f"<button><b class='{event['category']}'>{event['category']}</b> {escape(event['attribute'])}: matched "
            f"{mark(event['matched'])} · {escape(', '.join(observers))} · seq {evidence.seq}</button>"
            f"<div class='proof' hidden><p>Proved by record seq {evidence.seq}.</p>"
            f"{decoding(evidence, evidence.forms)}{found}{proof_download(timeline, evidence.seq, links)}"
            + (record_section(timeline, proving, evidence.forms, raw, proving=True) if proving else "")
            + (f"<details><summary>{len(carriers)} more records of its evidence carry it</summary>"
               + "".join(record_section(timeline, r, evidence.forms) for r in carriers) + "</details>"
               if carriers else "")
            + "</div></div>")


def action_item(timeline: Timeline, action: dict, proofs: dict[int, EventEvidence], links: ProofLinks) -> str:
    """An action: when, what, who saw it, what it sent with the matches marked, its events, its records;
    `proofs` holds each event's evidence by the event's id()."""
    events = timeline.events_of(action["n"])
    matches = [form for e in events for form in matched_forms(e["matched"])]
    seconds = timeline.seconds(action["seq"])
    when = f"+{seconds:.1f}s" if seconds is not None else "?"
    records = " ".join(str(r["seq"]) for r in timeline.exchange(action["evidence"]))
    return (f"<li class='action{' leaky' if events else ''}' data-observers='{escape(' '.join(action['observers']))}'>"
            f"<div class='head'>{when} #{action['n']} {escape(action['kind'])}/{escape(action['what'])} "
            f"{escape(action['channel'])} · {escape(', '.join(action['observers']))}</div>"
            + "".join(f"<div class='sent'>{escape(label)}: {marked(excerpt(value, matches, SHOW), matches)}</div>"
                      for label, value in sent_strings(action))
            + "".join(event_item(timeline, action, e, proofs[id(e)], links) for e in events)
            + f"<button class='records' data-seqs='{records}'>records</button><div class='records' hidden></div> "
            f"<span class='seqs'>seqs {' '.join(map(str, action['evidence']))}</span></li>")


def stored_record(timeline: Timeline, record: dict) -> str:
    """A record as the "records" button copies it, marked with the matches of the events it proves."""
    forms = [f for e in timeline.audit["events"] if record["seq"] in e["evidence"] for f in matched_forms(e["matched"])]
    return record_section(timeline, record, forms, stored=True)


def timeline_html(timeline: Timeline) -> str:
    """The whole page."""
    proofs = {id(e): event_evidence(timeline, e) for e in timeline.audit["events"]}
    links = proof_links(timeline.session, {p.seq for p in proofs.values()}) if proofs else ProofLinks({})
    actions = "".join(action_item(timeline, a, proofs, links) for a in timeline.audit["actions"])
    store = "".join(stored_record(timeline, r) for _, r in sorted(timeline.records.items()))
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width'>"
            f"<title>inspect {escape(timeline.audit['session'])}</title><style>{STYLE}</style></head><body>"
            f"{header(timeline)}{filters(timeline)}<ol id='timeline'>{actions}</ol><div hidden>{store}</div>"
            f"<script>{SCRIPT}</script></body></html>\n")
