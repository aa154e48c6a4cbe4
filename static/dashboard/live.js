/*
 * Live updates: one websocket per page; events name a topic and ids, never HTML.
 * Elements marked data-live="topic ..." with an hx-get are re-fetched through their normal
 * view when one of their topics changes, at most once per second per fragment. The socket
 * reconnects with exponential backoff and the header shows when the page is offline, except
 * after the server's refusals (4401: not signed in, 4400: bad topic), which no retry can cure.
 * Daphne turns a refusal during the handshake into HTTP 403, so the browser sees code 1006
 * then: a socket that closes without having opened asks its own page why (see probe()).
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
    fragmentsFor(event.topic).forEach(schedule);
  }

  function connect() {
    var wanted = topics();
    if (!wanted.length || !("WebSocket" in window)) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var url = scheme + location.host + "/ws/live/?topics=" + encodeURIComponent(wanted.join(","));
    var opened = false;
    socket = new WebSocket(url);
    socket.onopen = function () {
      opened = true;
      var missed = attempt > 0;
      attempt = 0;
      setStatus("online", "Live");
      // Events sent while we were away are lost: refresh everything once.
      if (missed) fragmentsFor("*").forEach(schedule);
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

  // For debugging and the browser tests: the socket, retries pending, whether live has stopped.
  window.draLive = {
    get socket() { return socket; },
    get attempt() { return attempt; },
    get stopped() { return stopped; }
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (topics().length) setStatus("connecting", "Connecting");
    connect();
  });
})();
