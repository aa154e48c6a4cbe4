/* Relative times that tick: <time class="ago" datetime="ISO"> shows "5 min ago", refreshed each
 * 30 s; the absolute time with its zone stays in the title (set by the server). */
(function () {
  "use strict";
  var UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
               ["hour", 3600], ["minute", 60]];

  function ago(seconds) {
    if (seconds < 60) return "just now";
    for (var i = 0; i < UNITS.length; i++) {
      var n = Math.floor(seconds / UNITS[i][1]);
      if (n >= 1) return n + "\u00a0" + UNITS[i][0] + (n === 1 ? "" : "s") + " ago";
    }
    return "just now";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.ago[datetime]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      if (!isNaN(at)) el.textContent = ago(Math.max(0, (now - at) / 1000));
    });
  }

  document.addEventListener("DOMContentLoaded", tick);
  document.addEventListener("htmx:afterSwap", tick);
  setInterval(tick, 30000);
})();
