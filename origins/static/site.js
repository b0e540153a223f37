/* The shops' own script: search suggestions, infinite scroll of results, and first-party
   events to POST /_log. Every page works without it; docs/TRACKING.md lists what it logs. */
(() => {
  "use strict";
  const LOG = "/_log";
  const MAX_TEXT = 200;

  function guard(fn) {
    return function () {
      try {
        return fn.apply(this, arguments);
      } catch (e) {
        /* the page keeps working without its script */
      }
    };
  }

  const text = (s) => String(s == null ? "" : s).replace(/\s+/g, " ").trim().slice(0, MAX_TEXT);
  const CONTROLS = "a, button, input[type=submit], input[type=button], [role=button], label, select, option";
  /* The text of an element's own text nodes, not of its descendants. */
  const ownText = (el) => Array.from(el.childNodes)
    .filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent).join(" ");
  const attr = (el, name) => {
    const found = el.closest("[" + name + "]");
    return found ? found.getAttribute(name) : null;
  };

  /* A same-origin http(s) URL resolved against `base`, or null (also for no URL at all). */
  function sameOrigin(url, base) {
    if (!url) return null;
    try {
      const resolved = new URL(url, base || location.href);
      return resolved.origin === location.origin ? resolved : null;
    } catch (e) {
      return null;
    }
  }

  function log(payload) {
    try {
      const body = JSON.stringify(payload);
      if (navigator.sendBeacon && navigator.sendBeacon(LOG, body)) return;
      if (window.fetch) fetch(LOG, { method: "POST", body: body, keepalive: true }).catch(() => {});
    } catch (e) {
      /* logging never breaks the page */
    }
  }

  /* --- search suggestions ---------------------------------------------------------------- */

  /* Suggestions overlay the page instead of pushing it down (a page's own CSS wins: zero specificity). */
  function suggestionStyle() {
    if (document.getElementById("suggestions-style")) return;
    const style = document.createElement("style");
    style.id = "suggestions-style";
    style.textContent =
      ":where(ul.suggestions) { position: absolute; z-index: 1000; margin: 0; padding: 0.25em 0;" +
      " list-style: none; background: #fff; border: 1px solid #999; min-width: 16em; }" +
      " :where(ul.suggestions li a) { display: block; padding: 0.2em 0.6em; }";
    (document.head || document.documentElement).append(style);
  }

  function suggest(form) {
    const input = form.querySelector('input[type="search"]');
    const source = sameOrigin(form.getAttribute("data-suggest"));
    if (!input || !source || !window.fetch) return;
    suggestionStyle();
    const list = document.createElement("ul");
    list.className = "suggestions";
    list.setAttribute("role", "listbox");
    list.id = (input.id || input.name || "q") + "-suggestions";
    list.hidden = true;
    input.insertAdjacentElement("afterend", list);
    input.setAttribute("autocomplete", "off");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-controls", list.id);
    input.setAttribute("aria-expanded", "false");

    let timer = 0;
    let latest = 0;
    const show = (visible) => {
      list.hidden = !visible;
      input.setAttribute("aria-expanded", visible ? "true" : "false");
    };

    function render(suggestions) {
      const items = [];
      for (const s of suggestions.slice(0, 10)) {
        const target = s && typeof s.text === "string" ? sameOrigin(s.url) : null;
        if (!target) continue;
        const li = document.createElement("li");
        li.setAttribute("role", "option");
        const a = document.createElement("a");
        a.href = target.href;
        a.textContent = s.text;
        li.append(a);
        items.push(li);
      }
      list.replaceChildren(...items);
      show(items.length > 0);
    }

    const fetchSuggestions = guard(() => {
      const query = input.value;
      const ticket = ++latest;
      if (!query.trim()) {
        render([]);
        return;
      }
      const url = new URL(source.href);
      url.searchParams.set("q", query);
      fetch(url.href, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then((r) => (r.ok ? r.json() : { suggestions: [] }))
        .then(guard((data) => {
          if (ticket !== latest || document.activeElement !== input) return;
          render(Array.isArray(data && data.suggestions) ? data.suggestions : []);
        }))
        .catch(() => {});
    });

    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(fetchSuggestions, 80);
    });
    input.addEventListener("blur", () => setTimeout(() => show(false), 200));
    input.addEventListener("focus", () => show(list.children.length > 0));
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Escape") show(false);
    });
    form.addEventListener("submit", () => {
      latest += 1;
      clearTimeout(timer);
      show(false);
    });
  }

  /* --- infinite scroll of results --------------------------------------------------------- */

  function infiniteScroll(list) {
    if (!("IntersectionObserver" in window) || !window.fetch || !window.DOMParser) return;
    const sentinel = document.createElement("div");
    sentinel.setAttribute("data-results-sentinel", "");
    sentinel.setAttribute("aria-hidden", "true");
    list.insertAdjacentElement("afterend", sentinel);
    let loading = false;
    let observer = null;

    const nextLink = () => document.querySelector('a[rel~="next"]');
    const stop = () => {
      if (observer) observer.disconnect();
      sentinel.remove();
    };
    const inView = () => {
      const r = sentinel.getBoundingClientRect();
      return r.top < (window.innerHeight || document.documentElement.clientHeight) && r.bottom >= 0;
    };

    const load = guard(() => {
      if (loading) return;
      const next = sameOrigin(list.getAttribute("data-next"));
      if (!next) {
        stop();
        return;
      }
      loading = true;
      fetch(next.href, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then((r) => {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text().then((html) => [r.url || next.href, html]);
        })
        .then(([pageUrl, html]) => {
          const doc = new DOMParser().parseFromString(html, "text/html");
          const more = doc.querySelector("[data-results]");
          if (!more) throw new Error("no [data-results] in " + pageUrl);
          const added = [];
          for (const child of Array.from(more.children)) {
            const node = document.importNode(child, true);
            list.append(node);
            added.push(node);
          }
          const following = more.getAttribute("data-next") ? sameOrigin(more.getAttribute("data-next"), pageUrl) : null;
          const link = nextLink();
          if (following) {
            list.setAttribute("data-next", following.href);
            if (link) link.href = following.href;
          } else {
            list.removeAttribute("data-next");
            if (link) link.remove();
          }
          document.dispatchEvent(new CustomEvent("spillage:results-appended",
            { detail: { url: pageUrl, items: added } }));
          watchSponsored(list);
          loading = false;
          if (!following) stop();
          else if (inView()) setTimeout(load, 0); /* still at the bottom: keep going */
        })
        .catch(() => {
          /* leave the Next page link for the reader to follow */
          loading = false;
          stop();
        });
    });

    observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) load();
    });
    observer.observe(sentinel);
  }

  /* --- first-party events ---------------------------------------------------------------- */

  let sponsoredSeen = new Set();
  const sponsoredSent = new Set();
  let sponsoredTimer = 0;
  const sponsoredObserved = new WeakSet();
  let sponsoredObserver = null;

  function flushSponsored() {
    clearTimeout(sponsoredTimer);
    if (!sponsoredSeen.size) return;
    log({ t: "impression", page: location.href, products: [...sponsoredSeen] });
    sponsoredSeen = new Set();
  }

  function watchSponsored(root) {
    if (!sponsoredObserver) return;
    for (const el of root.querySelectorAll("[data-sponsored][data-product]")) {
      if (sponsoredObserved.has(el)) continue;
      sponsoredObserved.add(el);
      sponsoredObserver.observe(el);
    }
  }

  function startLogging() {
    log({ t: "view", page: location.href, ref: document.referrer, title: document.title });

    document.addEventListener("click", guard((ev) => {
      const target = ev.target instanceof Element ? ev.target : null;
      /* The control clicked, else the element itself inside a product, facet or section: its own
         text, never a whole container's (a section holds whatever was typed or asked on the page). */
      const control = target && target.closest(CONTROLS);
      const el = control || (target && target.closest("[data-product], [data-facet], [data-section]") ? target : null);
      if (!el) return;
      log({
        t: "click",
        page: location.href,
        label: text(control ? el.innerText || el.value || el.getAttribute("aria-label") : ownText(el)),
        href: el instanceof HTMLAnchorElement && el.href ? el.href : null,
        product: attr(el, "data-product"),
        facet: attr(el, "data-facet"),
        section: attr(el, "data-section"),
      });
    }), true);

    if ("IntersectionObserver" in window) {
      sponsoredObserver = new IntersectionObserver(guard((entries) => {
        for (const e of entries) {
          const id = e.target.getAttribute("data-product");
          if (!e.isIntersecting || e.intersectionRatio < 0.5 || sponsoredSent.has(id)) continue;
          sponsoredSent.add(id);
          sponsoredSeen.add(id);
          sponsoredObserver.unobserve(e.target);
        }
        clearTimeout(sponsoredTimer);
        if (sponsoredSeen.size) sponsoredTimer = setTimeout(guard(flushSponsored), 1000);
      }), { threshold: 0.5 });
      watchSponsored(document);
    }
    window.addEventListener("pagehide", guard(flushSponsored));
  }

  const start = guard(() => {
    startLogging();
    for (const form of document.querySelectorAll('form[role="search"][data-suggest]')) guard(suggest)(form);
    const list = document.querySelector("[data-results]");
    if (list) guard(infiniteScroll)(list);
  });
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
