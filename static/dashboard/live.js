/*
 * Live updates: one websocket per page; events name a topic and ids, never HTML.
 * Elements marked data-live="topic ..." with an hx-get are re-fetched through their normal
 * view when one of their topics changes, at most once per second per fragment. The socket
 * reconnects with exponential backoff and the header shows when the page is offline.
 */
(function () {
  "use strict";
  var MIN_GAP_MS = 1000;
  var lastRefresh = {};
  var pending = {};
  var attempt = 0;
  var socket = null;

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
    document.body.setAttribute("data-live-last", String(Date.now()));
    fragmentsFor(event.topic).forEach(schedule);
  }

  function connect() {
    var wanted = topics();
    if (!wanted.length || !("WebSocket" in window)) return;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var url = scheme + location.host + "/ws/live/?topics=" + encodeURIComponent(wanted.join(","));
    socket = new WebSocket(url);
    socket.onopen = function () {
      var missed = attempt > 0;
      attempt = 0;
      setStatus("online", "Live");
      // Events sent while we were away are lost: refresh everything once.
      if (missed) fragmentsFor("*").forEach(schedule);
    };
    socket.onmessage = onMessage;
    socket.onclose = function () {
      attempt += 1;
      var delay = Math.min(30000, 1000 * Math.pow(2, attempt - 1));
      delay = Math.round(delay * (0.75 + Math.random() * 0.5));
      setStatus("offline", "Offline, retrying in " + Math.ceil(delay / 1000) + "s");
      setTimeout(connect, delay);
    };
  }

  // For debugging and the browser tests: the current socket and how many retries are pending.
  window.draLive = {
    get socket() { return socket; },
    get attempt() { return attempt; }
  };

  document.addEventListener("DOMContentLoaded", function () {
    if (topics().length) setStatus("connecting", "Connecting");
    connect();
  });
})();
