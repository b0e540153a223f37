/* metrics.test analytics and session replay: page views, clicks, scroll depth, on-screen dwell
   of products and sections, form fields with their values, search keystrokes and form
   submissions, all sent to ENDPOINT. docs/TRACKING.md lists every event and field. */
(() => {
  "use strict";
  const ENDPOINT = "https://metrics.test/collect";
  const CLICKABLE = "a, button, input[type=submit], input[type=button], [role=button], label, select, option, [data-facet]";
  const WATCHED = "[data-product], [data-section]";
  const FIELDS = "input, textarea, select";
  const MAX_TEXT = 200;
  const MAX_VALUE = 1000;
  const MAX_ITEMS = 300;

  const now = () => (window.performance && performance.now ? performance.now() : Date.now());

  function randomId() {
    try {
      const bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    } catch (e) {
      return Math.random().toString(16).slice(2) + Date.now().toString(16);
    }
  }

  /* The visitor's id in the first-party cookie _mt_id (one year), created when absent. */
  function clientId() {
    try {
      const found = document.cookie.split("; ").find((c) => c.startsWith("_mt_id="));
      if (found && found.length > 7) return decodeURIComponent(found.slice(7));
      const id = randomId();
      document.cookie = "_mt_id=" + id + "; path=/; max-age=31536000; SameSite=Lax" +
        (location.protocol === "https:" ? "; Secure" : "");
      return id;
    } catch (e) {
      return null;
    }
  }

  const CID = clientId();
  const SID = randomId();

  /* POST one event; `unloading` uses a keepalive fetch, which outlives the page more reliably. */
  function send(payload, unloading) {
    try {
      const body = JSON.stringify(Object.assign({}, payload, { cid: CID, sid: SID }));
      if (unloading && window.fetch) {
        fetch(ENDPOINT, { method: "POST", body: body, keepalive: true, mode: "no-cors", credentials: "include" })
          .catch(() => {});
        return;
      }
      if (navigator.sendBeacon && navigator.sendBeacon(ENDPOINT, body)) return;
      if (window.fetch) {
        fetch(ENDPOINT, { method: "POST", body: body, keepalive: true, mode: "no-cors", credentials: "include" })
          .catch(() => {});
      }
    } catch (e) {
      /* a tracker never breaks the page */
    }
  }

  function guard(fn) {
    return function () {
      try {
        return fn.apply(this, arguments);
      } catch (e) {
        /* a tracker never breaks the page */
      }
    };
  }

  const text = (s, max) => String(s == null ? "" : s).replace(/\s+/g, " ").trim().slice(0, max || MAX_TEXT);
  const attr = (el, name) => {
    const found = el && el.closest ? el.closest("[" + name + "]") : null;
    return found ? found.getAttribute(name) : null;
  };
  const absolute = (url) => {
    try {
      return new URL(url || "", location.href).href;
    } catch (e) {
      return null;
    }
  };

  /* data-product / data-section values of elements now in the viewport, in page order. */
  function seen() {
    const height = window.innerHeight || document.documentElement.clientHeight;
    const width = window.innerWidth || document.documentElement.clientWidth;
    const values = new Set();
    for (const el of document.querySelectorAll(WATCHED)) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.bottom <= 0 || r.right <= 0 || r.top >= height || r.left >= width) continue;
      for (const name of ["data-product", "data-section"]) {
        if (el.hasAttribute(name)) values.add(el.getAttribute(name));
      }
    }
    return [...values].slice(0, MAX_ITEMS);
  }

  function depth() {
    const doc = document.documentElement;
    const total = Math.max(doc.scrollHeight, document.body ? document.body.scrollHeight : 0);
    if (!total) return 100;
    return Math.min(100, Math.round(((window.scrollY + window.innerHeight) / total) * 100));
  }

  /* --- page view ------------------------------------------------------------------------ */

  const view = guard(() => {
    send({ t: "view", page: location.href, ref: document.referrer, title: document.title, seen: seen() });
  });
  if (document.readyState === "complete") view();
  else window.addEventListener("load", view);

  /* --- clicks --------------------------------------------------------------------------- */

  document.addEventListener("click", guard((ev) => {
    const el = ev.target instanceof Element ? ev.target.closest(CLICKABLE) : null;
    if (!el) return;
    const label = el.innerText || el.value || el.getAttribute("aria-label") || el.getAttribute("title") || "";
    send({
      t: "click",
      page: location.href,
      label: text(label),
      href: el instanceof HTMLAnchorElement && el.href ? el.href : null,
      tag: el.tagName.toLowerCase(),
      product: attr(el, "data-product"),
      facet: attr(el, "data-facet"),
      section: attr(el, "data-section"),
    });
  }), true);

  /* --- scroll --------------------------------------------------------------------------- */

  /* One event 300 ms after scrolling stops; a scroll the page is left within those 300 ms (a click
     that scrolled its target into view and navigated) is sent as the page is left. */
  let scrollTimer = 0;
  let scrollPending = false;
  function sendScroll(unloading) {
    clearTimeout(scrollTimer);
    scrollPending = false;
    send({ t: "scroll", page: location.href, depth: depth(), seen: seen() }, unloading);
  }
  const scrolled = guard(() => {
    clearTimeout(scrollTimer);
    scrollPending = true;
    scrollTimer = setTimeout(guard(() => sendScroll(false)), 300);
  });
  window.addEventListener("scroll", scrolled, { passive: true });
  /* A page opened at an anchor (#questions) may have scrolled before this script (async) started:
     that scroll is reported too, so it does not depend on which came first. */
  if (window.scrollY > 0) scrolled();

  /* --- impressions: dwell of products and sections at least half on screen ---------------- */

  const shown = new Map();   /* key -> {kind, id, sponsored, visible: count of elements, since} */
  const counted = new WeakSet();  /* elements now counted as visible */
  const pending = new Map(); /* key -> ms of dwell not yet sent */
  let observer = null;
  const observed = new WeakSet();

  function keysOf(el) {
    const keys = [];
    const sponsored = !!el.closest('[data-sponsored]:not([data-sponsored="0"]):not([data-sponsored="false"])');
    if (el.hasAttribute("data-product")) keys.push(["product", el.getAttribute("data-product"), sponsored]);
    if (el.hasAttribute("data-section")) keys.push(["section", el.getAttribute("data-section"), sponsored]);
    return keys;
  }

  function accrue(key, entry, at) {
    const ms = Math.round(at - entry.since);
    if (ms > 0) pending.set(key, (pending.get(key) || 0) + ms);
    entry.since = at;
  }

  function visibility(el, visible) {
    if (visible === counted.has(el)) return;
    if (visible) counted.add(el);
    else counted.delete(el);
    const at = now();
    for (const [kind, id, sponsored] of keysOf(el)) {
      const key = kind + ":" + id;
      let entry = shown.get(key);
      if (!entry) {
        entry = { kind: kind, id: id, sponsored: sponsored, visible: 0, since: at };
        shown.set(key, entry);
      }
      if (sponsored) entry.sponsored = true;
      if (visible) {
        if (entry.visible === 0) entry.since = at;
        entry.visible += 1;
      } else if (entry.visible > 0) {
        entry.visible -= 1;
        if (entry.visible === 0) accrue(key, entry, at);
      }
    }
  }

  function watch(root) {
    if (!observer || !(root instanceof Element)) return;
    const found = root.matches(WATCHED) ? [root] : [];
    for (const el of root.querySelectorAll(WATCHED)) found.push(el);
    for (const el of found) {
      if (observed.has(el)) continue;
      observed.add(el);
      observer.observe(el);
    }
  }

  function unwatch(root) {
    if (!observer || !(root instanceof Element)) return;
    const found = root.matches(WATCHED) ? [root] : [];
    for (const el of root.querySelectorAll(WATCHED)) found.push(el);
    for (const el of found) {
      if (el.isConnected) continue;
      visibility(el, false);
      observer.unobserve(el);
      observed.delete(el);
    }
  }

  function flushImpressions(unloading) {
    const at = now();
    for (const [key, entry] of shown) {
      if (entry.visible > 0) accrue(key, entry, at);
    }
    if (!pending.size) return;
    const items = [];
    for (const [key, ms] of pending) {
      const entry = shown.get(key);
      items.push({ kind: entry.kind, id: entry.id, ms: ms, sponsored: entry.sponsored });
    }
    pending.clear();
    for (let i = 0; i < items.length; i += MAX_ITEMS) {
      send({ t: "impression", page: location.href, items: items.slice(i, i + MAX_ITEMS) }, unloading);
    }
  }

  const startImpressions = guard(() => {
    if (observer || !("IntersectionObserver" in window)) return;
    /* Half of the element on screen, or, for one taller than two screens, half of the screen. */
    const thresholds = [];
    for (let i = 0; i <= 20; i += 1) thresholds.push(i / 20);
    observer = new IntersectionObserver(guard((entries) => {
      for (const e of entries) {
        const screen = e.rootBounds ? e.rootBounds.height : window.innerHeight;
        const visible = e.isIntersecting &&
          (e.intersectionRatio >= 0.5 || e.intersectionRect.height >= screen / 2);
        visibility(e.target, visible);
      }
    }), { threshold: thresholds });
    watch(document.documentElement);
    if ("MutationObserver" in window) {
      new MutationObserver(guard((records) => {
        for (const r of records) {
          for (const node of r.addedNodes) watch(node);
          for (const node of r.removedNodes) unwatch(node);
        }
      })).observe(document.documentElement, { childList: true, subtree: true });
    }
    document.addEventListener("spillage:results-appended", guard(() => watch(document.documentElement)));
    setInterval(guard(() => flushImpressions(false)), 2000);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", startImpressions);
  else startImpressions();

  /* --- form fields, as session replay records them --------------------------------------- */

  function labelOf(el) {
    if (el.labels && el.labels.length) return text(el.labels[0].innerText || el.labels[0].textContent);
    if (el.getAttribute("aria-label")) return text(el.getAttribute("aria-label"));
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const parts = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean);
      return text(parts.map((p) => p.textContent).join(" "));
    }
    return text(el.getAttribute("placeholder"));
  }

  function valueOf(el) {
    if (el.type === "password") return "***";
    if (el.type === "checkbox" || el.type === "radio") return el.checked ? el.value : "";
    if (el.type === "file") return Array.from(el.files || [], (f) => f.name).join(", ");
    return String(el.value).slice(0, MAX_VALUE);
  }

  function fieldEvent(action) {
    return guard((ev) => {
      const el = ev.target;
      if (!(el instanceof Element) || !el.matches(FIELDS) || el.type === "hidden") return;
      send({
        t: "field",
        page: location.href,
        action: action,
        form: el.form ? absolute(el.form.getAttribute("action")) : null,
        name: el.name || el.id || null,
        type: el.type || el.tagName.toLowerCase(),
        label: labelOf(el),
        value: valueOf(el),
      });
    });
  }
  document.addEventListener("focusin", fieldEvent("focus"), true);
  document.addEventListener("change", fieldEvent("change"), true);

  /* --- keystrokes in search boxes -------------------------------------------------------- */

  const typing = new Map(); /* input element -> {name, first, entries, timer} */

  function isSearchBox(el) {
    return el instanceof HTMLInputElement &&
      (el.type === "search" || (el.type === "text" && !!el.closest('form[role="search"]')));
  }

  function flushKeys(el, unloading) {
    const state = typing.get(el);
    if (!state) return;
    typing.delete(el);
    clearTimeout(state.timer);
    send({ t: "keys", page: location.href, name: state.name, entries: state.entries }, unloading);
  }

  function flushAllKeys(unloading) {
    for (const el of [...typing.keys()]) flushKeys(el, unloading);
  }

  document.addEventListener("input", guard((ev) => {
    const el = ev.target;
    if (!isSearchBox(el)) return;
    let state = typing.get(el);
    if (!state) {
      state = { name: el.name || el.id || null, first: now(), entries: [], timer: 0 };
      typing.set(el, state);
    }
    if (state.entries.length < MAX_ITEMS) {
      state.entries.push({ value: String(el.value).slice(0, MAX_TEXT), ms: Math.round(now() - state.first) });
    }
    clearTimeout(state.timer);
    state.timer = setTimeout(guard(() => flushKeys(el, false)), 700);
  }), true);

  /* --- form submissions ------------------------------------------------------------------ */

  function submittedFields(form) {
    const fields = [];
    for (const el of form.elements) {
      if (!el.name || el.disabled || !el.matches(FIELDS)) continue;
      const type = el.type;
      if (["hidden", "password", "submit", "button", "reset", "image", "file"].includes(type)) continue;
      if ((type === "checkbox" || type === "radio") && !el.checked) continue;
      if (el instanceof HTMLSelectElement) {
        for (const option of el.selectedOptions) fields.push([el.name, option.value]);
        continue;
      }
      fields.push([el.name, String(el.value).slice(0, MAX_VALUE)]);
    }
    return fields.slice(0, MAX_ITEMS);
  }

  document.addEventListener("submit", guard((ev) => {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement)) return;
    flushAllKeys(false);
    send({
      t: "submit",
      page: location.href,
      action: absolute(form.getAttribute("action")),
      method: (form.getAttribute("method") || "get").toLowerCase(),
      fields: submittedFields(form),
    });
  }), true);

  /* --- leaving the page ------------------------------------------------------------------ */

  const leaving = guard(() => {
    if (scrollPending) sendScroll(true);
    flushAllKeys(true);
    flushImpressions(true);
  });
  document.addEventListener("visibilitychange", guard(() => {
    if (document.visibilityState === "hidden") leaving();
  }));
  window.addEventListener("pagehide", leaving);
})();
