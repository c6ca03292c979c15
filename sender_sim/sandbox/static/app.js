// hookproof sandbox dashboard: the live deliveries list and the DLQ bulk selection.
// Vendored with the package; no framework, no build step, no inline script (the CSP forbids it).
(function () {
  "use strict";

  function live(tbody) {
    var src = tbody.getAttribute("data-live");
    var status = document.getElementById("live-status");
    var last = tbody.innerHTML;
    function tick() {
      if (document.hidden) { return; }
      fetch(src, { headers: { "accept": "text/html" }, credentials: "same-origin" })
        .then(function (r) { if (!r.ok) { throw new Error(r.status); } return r.text(); })
        .then(function (html) {
          if (html !== last) { tbody.innerHTML = html; last = html; }
          if (status) { status.textContent = "live"; status.classList.remove("paused"); }
        })
        .catch(function () {
          if (status) { status.textContent = "reconnecting"; status.classList.add("paused"); }
        });
    }
    setInterval(tick, 1000);
  }

  function bulk(form) {
    var max = parseInt(form.getAttribute("data-max") || "100", 10);
    var boxes = form.querySelectorAll("input[type=checkbox][name=ids]");
    var all = form.querySelector("[data-select-all]");
    var label = document.getElementById("selected-count");
    var buttons = form.querySelectorAll("[data-bulk]");
    function update() {
      var n = 0;
      boxes.forEach(function (b) { if (b.checked) { n += 1; } });
      if (label) { label.textContent = n + " selected" + (n > max ? " (too many: at most " + max + ")" : ""); }
      buttons.forEach(function (b) { b.disabled = n < 1 || n > max; });
    }
    if (all) {
      all.addEventListener("change", function () {
        boxes.forEach(function (b) { b.checked = all.checked; });
        update();
      });
    }
    boxes.forEach(function (b) { b.addEventListener("change", update); });
    buttons.forEach(function (b) {
      b.addEventListener("click", function (e) {
        var n = 0;
        boxes.forEach(function (x) { if (x.checked) { n += 1; } });
        var what = b.getAttribute("data-bulk") === "resend" ? "Resend" : "Redrive";
        if (!window.confirm(what + " " + n + " selected deliver" + (n === 1 ? "y" : "ies") + "? All or none are queued.")) {
          e.preventDefault();
        }
      });
    });
    update();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("tbody[data-live]").forEach(live);
    document.querySelectorAll("form#bulk").forEach(bulk);
  });
})();
