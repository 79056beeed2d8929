// LedgerMQ console: the only script. Two jobs, no dependencies:
// 1. Live parts: every element with data-live="URL" is replaced by a fresh copy of URL (HTML
//    rendered by the server) every data-interval ms. Polling needs no server state and passes
//    any proxy; it pauses while the tab is hidden and while a form inside the part has focus.
// 2. Confirmation: a form with data-confirm="question" is posted only if the user agrees.
"use strict";

(function () {
  const status = document.getElementById("live-status");

  function show(text, ok) {
    if (!status) return;
    status.textContent = text;
    status.className = "live-status " + (ok ? "ok" : "failed");
  }

  function refresh(part) {
    if (document.hidden || part.contains(document.activeElement) && document.activeElement !== document.body) {
      return Promise.resolve();
    }
    return fetch(part.dataset.live, { headers: { "X-Requested-With": "console.js" }, cache: "no-store" })
      .then(function (response) {
        return response.text().then(function (html) {
          part.innerHTML = html;
          if (response.ok) {
            show("live · " + new Date().toLocaleTimeString(), true);
          } else {
            show("live · failed " + new Date().toLocaleTimeString(), false);
          }
        });
      })
      .catch(function () {
        show("console unreachable · " + new Date().toLocaleTimeString(), false);
      });
  }

  document.querySelectorAll("[data-live]").forEach(function (part) {
    const interval = parseInt(part.dataset.interval || "2000", 10);
    show("live", true);
    (function loop() {
      setTimeout(function () { refresh(part).then(loop); }, interval);
    })();
  });

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (form.dataset && form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
    }
  });
})();
