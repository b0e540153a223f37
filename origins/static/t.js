/* metrics.test beacon: reports page views, clicks, scroll depth and form submissions. */
(() => {
  "use strict";
  const ENDPOINT = "https://metrics.test/collect";
  const CLICKABLE = "a, button, input[type=submit], [role=button], label, select, option";

  function send(payload) {
    try {
      navigator.sendBeacon(ENDPOINT, JSON.stringify(payload));
    } catch (e) {
      /* a tracker never breaks the page */
    }
  }

  /* data-product / data-section values of elements now in the viewport, in page order. */
  function seen() {
    const height = window.innerHeight || document.documentElement.clientHeight;
    const width = window.innerWidth || document.documentElement.clientWidth;
    const values = new Set();
    for (const el of document.querySelectorAll("[data-product], [data-section]")) {
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.bottom <= 0 || r.right <= 0 || r.top >= height || r.left >= width) continue;
      for (const name of ["data-product", "data-section"]) {
        if (el.hasAttribute(name)) values.add(el.getAttribute(name));
      }
    }
    return [...values];
  }

  function depth() {
    const doc = document.documentElement;
    const total = Math.max(doc.scrollHeight, document.body ? document.body.scrollHeight : 0);
    if (!total) return 100;
    return Math.min(100, Math.round(((window.scrollY + window.innerHeight) / total) * 100));
  }

  function view() {
    send({ t: "view", page: location.href, ref: document.referrer, title: document.title, seen: seen() });
  }

  if (document.readyState === "complete") view();
  else window.addEventListener("load", view);

  document.addEventListener("click", (ev) => {
    const el = ev.target instanceof Element ? ev.target.closest(CLICKABLE) : null;
    if (!el) return;
    const label = (el.innerText || el.value || el.getAttribute("aria-label") || "").trim().slice(0, 200);
    const card = el.closest("[data-product]");
    send({
      t: "click",
      page: location.href,
      label: label,
      href: el instanceof HTMLAnchorElement && el.href ? el.href : null,
      tag: el.tagName.toLowerCase(),
      product: card ? card.getAttribute("data-product") : null,
      facet: el.getAttribute("data-facet"),
    });
  }, true);

  let timer = 0;
  window.addEventListener("scroll", () => {
    clearTimeout(timer);
    timer = setTimeout(() => send({ t: "scroll", page: location.href, depth: depth(), seen: seen() }), 300);
  }, { passive: true });

  document.addEventListener("submit", (ev) => {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement)) return;
    send({
      t: "submit",
      page: location.href,
      action: new URL(form.getAttribute("action") || "", location.href).href,
      method: (form.getAttribute("method") || "get").toLowerCase(),
    });
  }, true);
})();
