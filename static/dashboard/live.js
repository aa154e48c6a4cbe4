/*
 * Live updates: one websocket per page; events name a topic and ids, never HTML.
 * Elements marked data-live="topic ..." with an hx-get are re-fetched through their normal
 * view when one of their topics changes, at most once per second per fragment. The socket
 * reconnects with exponential backoff and the header shows when the page is offline, except
 * after the server's refusals (4401: not signed in, 4400: bad topic), which no retry can cure.
 * Daphne turns a refusal during the handshake into HTTP 403, so the browser sees code 1006
 * then: a socket that closes without having opened asks its own page why (see probe()).
 *
 * The header's #sync-status badge says how current the data is, not whether the socket is open:
 * "synced 3 s ago" (ticking from the server's asOf), "stale: ...", "switching clusters: ...",
 * "snapshot imported 10:00". It reads /freshness/ (inventory/freshness.py) when a `sync` event
 * arrives and every few seconds besides, so that a watcher that went silent, which publishes
 * nothing, is noticed too; the banner under the header follows it. A new snapshot import
 * refreshes every fragment (without Redis its events cannot reach this process).
 */
(function () {
  "use strict";
  var MIN_GAP_MS = 1000;
  var lastRefresh = {};
  var pending = {};
  // The newest event's id: a refresh asks for `live=<seq>`, the same URL as every other page
  // refreshing for that event, so the server renders the fragment once for all of them.
  var lastSeq = "";
  var attempt = 0;
  var socket = null;
  var stopped = false;
  // Close codes of dashboard/consumers.py that a reload, not a retry, can fix.
  var FINAL_CLOSE = {
    4401: "Signed out \u2014 reload to sign in",
    4400: "Live updates refused \u2014 reload the page"
  };

  function topics() {
    var raw = document.body.getAttribute("data-live-topics") || "";
    return raw.split(/\s+/).filter(Boolean);
  }

  // What the socket follows: the page's topics, plus `sync` for the freshness badge.
  function socketTopics(wanted) {
    if (!document.getElementById("sync-status") || wanted.indexOf("sync") >= 0) return wanted;
    return wanted.concat(["sync"]);
  }

  var FRESHNESS_POLL_MS = 5000;
  var freshnessTimer = null;
  var freshnessBusy = false;
  // Server time minus browser time, from the last answer: ages are the server's.
  var skewMs = 0;
  var lastSnapshot = null;

  function syncBadge() { return document.getElementById("sync-status"); }

  function ageText(seconds) {
    if (seconds < 90) return Math.max(0, Math.round(seconds)) + " s";
    if (seconds < 5400) return Math.round(seconds / 60) + " min";
    if (seconds < 172800) return Math.round(seconds / 3600) + " h";
    return Math.round(seconds / 86400) + " days";
  }

  function tickBadge() {
    var el = syncBadge();
    if (!el || el.getAttribute("data-state") !== "live") return;
    var asOf = Date.parse(el.getAttribute("data-as-of") || "");
    if (isNaN(asOf)) return;
    el.textContent = "synced " + ageText((Date.now() + skewMs - asOf) / 1000) + " ago";
  }

  function applyFreshness(f) {
    var el = syncBadge();
    if (!el || !f || !f.state) return;
    var checked = Date.parse(f.checkedAt || "");
    if (!isNaN(checked)) skewMs = checked - Date.now();
    el.setAttribute("data-state", f.state);
    el.setAttribute("data-as-of", f.asOf || "");
    el.textContent = f.badge || f.state;
    el.title = el.textContent + " (the sync status page says more)";
    tickBadge();
    var banner = document.getElementById("freshness-banner");
    if (banner) {
      banner.setAttribute("data-state", f.state);
      banner.textContent = f.banner || "";
      banner.hidden = !f.banner;
    }
    var snapshot = f.snapshot === null || f.snapshot === undefined ? "" : String(f.snapshot);
    if (lastSnapshot !== null && snapshot !== lastSnapshot) fragmentsFor("*").forEach(schedule);
    lastSnapshot = snapshot;
  }

  function readFreshness() {
    var el = syncBadge();
    if (!el || !window.fetch || freshnessBusy) return;
    freshnessBusy = true;
    fetch(el.getAttribute("data-url"), {
      credentials: "same-origin", redirect: "manual", headers: { Accept: "application/json" }
    })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(applyFreshness)
      .catch(function () { /* the socket's indicator says when the server is away */ })
      .then(function () { freshnessBusy = false; });
  }

  // Soon, once: a burst of sync events reads the freshness once.
  function freshnessSoon() {
    if (freshnessTimer) return;
    freshnessTimer = setTimeout(function () { freshnessTimer = null; readFreshness(); }, 200);
  }

  function startFreshness() {
    var el = syncBadge();
    if (!el) return;
    var checked = Date.parse(el.getAttribute("data-checked-at") || "");
    if (!isNaN(checked)) skewMs = checked - Date.now();
    lastSnapshot = el.getAttribute("data-snapshot") || "";
    tickBadge();
    setInterval(tickBadge, 1000);
    setInterval(function () { if (!document.hidden) readFreshness(); }, FRESHNESS_POLL_MS);
    document.addEventListener("visibilitychange", function () {
      if (!document.hidden) readFreshness();
    });
  }

  function setStatus(state, text) {
    var el = document.getElementById("live-status");
    if (!el) return;
    el.setAttribute("data-state", state);
    el.textContent = text;
    document.body.classList.toggle("offline", state === "offline");
  }

  function refresh(el) {
    var key = el.id;
    lastRefresh[key] = Date.now();
    delete pending[key];
    var target = document.getElementById(key);
    if (target && window.htmx) {
      if (lastSeq) target.setAttribute("data-live-seq", lastSeq);
      htmx.trigger(target, "live");
    }
  }

  // Coalesce: a burst of events refreshes a fragment once now and once more a second later.
  function schedule(el) {
    var key = el.id;
    if (!key || pending[key]) return;
    var wait = (lastRefresh[key] || 0) + MIN_GAP_MS - Date.now();
    if (wait <= 0) {
      refresh(el);
    } else {
      pending[key] = setTimeout(function () { refresh(el); }, wait);
    }
  }

  function fragmentsFor(topic) {
    var found = [];
    document.querySelectorAll("[data-live]").forEach(function (el) {
      var wanted = (el.getAttribute("data-live") || "").split(/\s+/);
      if (topic === "*" || wanted.indexOf(topic) >= 0) found.push(el);
    });
    return found;
  }

  function onMessage(message) {
    var event;
    try { event = JSON.parse(message.data); } catch (e) { return; }
    if (!event || !event.topic) return;
    if (typeof event.seq === "string" && /^[0-9a-f]{1,64}$/.test(event.seq)) lastSeq = event.seq;
    document.body.setAttribute("data-live-last", String(Date.now()));
    if (event.topic === "sync" || event.kind === "sync") freshnessSoon();
    fragmentsFor(event.topic).forEach(schedule);
  }

  function connect() {
    var wanted = topics();
    if (!wanted.length || !("WebSocket" in window)) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var url = scheme + location.host + "/ws/live/?topics=" +
      encodeURIComponent(socketTopics(wanted).join(","));
    var opened = false;
    socket = new WebSocket(url);
    socket.onopen = function () {
      opened = true;
      var missed = attempt > 0;
      attempt = 0;
      setStatus("online", "connected");
      // Events sent while we were away are lost: refresh everything once.
      if (missed) {
        fragmentsFor("*").forEach(schedule);
        freshnessSoon();
      }
    };
    socket.onmessage = onMessage;
    socket.onclose = function (event) {
      if (FINAL_CLOSE[event.code]) {
        stop(event.code);
        return;
      }
      if (!opened) {
        probe(wanted, retry);
        return;
      }
      retry();
    };
  }

  function stop(code) {
    stopped = true;
    setStatus("offline", FINAL_CLOSE[code]);
  }

  // A refused handshake looks like a network error. The page itself knows: the view redirects a
  // signed-out user to the login page, or (public read) renders without live topics; other topics
  // than ours mean the server no longer knows one of them. Anything else (server down): retry.
  function probe(wanted, otherwise) {
    if (!window.fetch) { otherwise(); return; }
    fetch(location.href, { credentials: "same-origin", redirect: "manual" })
      .then(function (response) {
        if (response.type === "opaqueredirect" || response.status === 401) return stop(4401);
        if (!response.ok) return otherwise();
        return response.text().then(function (html) {
          var doc = new DOMParser().parseFromString(html, "text/html");
          var now = (doc.body.getAttribute("data-live-topics") || "").split(/\s+/).filter(Boolean);
          if (!now.length) return stop(4401);
          if (now.join(" ") !== wanted.join(" ")) return stop(4400);
          otherwise();
        });
      })
      .catch(otherwise);
  }

  function retry() {
    attempt += 1;
    var delay = Math.min(30000, 1000 * Math.pow(2, attempt - 1));
    delay = Math.round(delay * (0.75 + Math.random() * 0.5));
    setStatus("offline", "Offline, retrying in " + Math.ceil(delay / 1000) + "s");
    setTimeout(connect, delay);
  }

  // A live refresh names the event it answers (see lastSeq); other requests are untouched.
  document.addEventListener("htmx:configRequest", function (e) {
    var elt = e.detail && e.detail.elt;
    var seq = elt && elt.getAttribute && elt.getAttribute("data-live-seq");
    if (seq && e.detail.triggeringEvent && e.detail.triggeringEvent.type === "live") {
      e.detail.parameters.live = seq;
    }
  });

  // A live refresh answered 404: the object this page shows was deleted from the cluster. Keep its
  // last known state on screen, say so, and stop refreshing what can no longer change.
  document.addEventListener("htmx:responseError", function (e) {
    var detail = e.detail || {};
    var elt = detail.elt;
    var trigger = detail.requestConfig && detail.requestConfig.triggeringEvent;
    if (!elt || !detail.xhr || detail.xhr.status !== 404) return;
    if (!trigger || trigger.type !== "live" || elt.classList.contains("gone")) return;
    elt.removeAttribute("data-live");
    elt.classList.add("gone");
    var note = document.createElement("div");
    note.className = "gone-note";
    note.setAttribute("role", "alert");
    note.textContent = "Deleted from the cluster at " + new Date().toLocaleTimeString() +
      ": what follows is its last known state.";
    elt.insertBefore(note, elt.firstChild);
  });

  // A refreshed pool keeps open the counter-set groups the reader opened: the fragment comes back
  // with every <details> closed.
  var openGroups = null;
  document.addEventListener("htmx:beforeSwap", function (e) {
    var target = e.detail && e.detail.target;
    if (!target || !target.querySelectorAll) return;
    openGroups = Array.prototype.map.call(
      target.querySelectorAll("details[data-counter-set][open]"),
      function (d) { return d.getAttribute("data-counter-set"); }
    );
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!openGroups || !openGroups.length) { openGroups = null; return; }
    Array.prototype.forEach.call(document.querySelectorAll("details[data-counter-set]"), function (d) {
      if (openGroups.indexOf(d.getAttribute("data-counter-set")) >= 0) d.open = true;
    });
    openGroups = null;
  });

  // For debugging and the browser tests: the socket, retries pending, whether live has stopped.
  window.draLive = {
    get socket() { return socket; },
    get attempt() { return attempt; },
    get stopped() { return stopped; }
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (topics().length) setStatus("connecting", "Connecting");
    startFreshness();
    connect();
  });
})();
