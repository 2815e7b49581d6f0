/* pgs inspect: filtering steps and rows, sorting tables. Inlined in the page; no requests.
   ?q=TEXT pre-fills the filter; ?sort=KEY&order=desc sorts a batch table on load. */
(function () {
  "use strict";
  var params = new URLSearchParams(window.location.search);

  function setupFilter(input) {
    var scope = document.getElementById(input.getAttribute("data-scope")) || document;
    var items = Array.prototype.slice.call(scope.querySelectorAll("[data-item]"));
    var counter = document.getElementById(input.id + "-count");
    var noun = input.getAttribute("data-noun") || "items";
    function run() {
      var needle = input.value.trim().toLowerCase();
      var shown = 0;
      items.forEach(function (el) {
        var hit = !needle || el.textContent.toLowerCase().indexOf(needle) >= 0;
        el.hidden = !hit;
        if (hit) {
          shown += 1;
          if (needle) {
            el.querySelectorAll("details").forEach(function (d) {
              if (d.textContent.toLowerCase().indexOf(needle) >= 0) { d.open = true; }
            });
          }
        }
      });
      if (counter) {
        counter.textContent = needle
          ? shown + " of " + items.length + " " + noun + " match"
          : items.length + " " + noun;
      }
    }
    var timer = null;
    input.addEventListener("input", function () {
      window.clearTimeout(timer);
      timer = window.setTimeout(run, 120);
    });
    if (params.get("q")) { input.value = params.get("q"); }
    run();
  }

  function cellValue(row, index, numeric) {
    var cell = row.children[index];
    var raw = cell ? (cell.getAttribute("data-v") !== null ? cell.getAttribute("data-v") : cell.textContent) : "";
    if (numeric) {
      var n = parseFloat(raw);
      return isNaN(n) ? -Infinity : n;
    }
    return raw.trim().toLowerCase();
  }

  function setupSort(table) {
    var heads = Array.prototype.slice.call(table.querySelectorAll("thead th"));
    var body = table.tBodies[0];
    function sortBy(th, descending) {
      var index = heads.indexOf(th);
      var numeric = th.getAttribute("data-type") === "num";
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
        var order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
      rows.forEach(function (r) { body.appendChild(r); });
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
    }
    heads.forEach(function (th) {
      th.addEventListener("click", function () {
        sortBy(th, th.getAttribute("aria-sort") === "ascending");
      });
    });
    var key = params.get("sort");
    if (key) {
      var th = table.querySelector('thead th[data-key="' + key.replace(/[^a-z_]/gi, "") + '"]');
      if (th) { sortBy(th, params.get("order") === "desc"); }
    }
  }

  document.querySelectorAll("input[data-filter]").forEach(setupFilter);
  document.querySelectorAll("table.sortable").forEach(setupSort);
  document.documentElement.setAttribute("data-ready", "1");
})();
