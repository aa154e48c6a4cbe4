/* Copy buttons: <button data-copy="element-id"> copies that element's text to the clipboard. */
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    var status = button.parentNode.querySelector(".copied");
    if (!source) return;
    var say = function (text) { if (status) status.textContent = text; };
    var text = source.textContent;
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(
        function () { say("Copied"); },
        function () { fallback(); }
      );
    } else {
      fallback();
    }
    // Older browsers and plain-http origins have no async clipboard: select and copy.
    function fallback() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      say(document.execCommand && document.execCommand("copy") ? "Copied" : "Selected: press Ctrl+C");
    }
  });
})();
