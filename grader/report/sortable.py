"""The class report's style and its one script: a click on a table's header sorts that table (by each cell's
`data-sort` number where it has one, else its text), and a second click reverses it. The page reads the same without
it; its Content-Security-Policy admits exactly these two texts by their hashes (class_page.py)."""
from __future__ import annotations

STYLE = """body{font-family:sans-serif;max-width:72em;margin:2em auto;padding:0 1em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top}.wide{overflow-x:auto}
th button{font:inherit;font-weight:bold;border:0;background:none;padding:0;cursor:pointer}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
.passed{background:#e2efda}.failed{background:#fce4d6}.did-not-load{background:#f4cccc}.not-started{color:#777}
pre{white-space:pre-wrap;margin:.2em 0;max-width:60em}"""
SCRIPT = """document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(heads, function (th, col) {
    var button = document.createElement("button");
    button.type = "button";
    while (th.firstChild) { button.appendChild(th.firstChild); }
    th.appendChild(button);
    button.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
      var up = th.getAttribute("aria-sort") !== "ascending";
      Array.prototype.forEach.call(heads, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      function key(row) {
        var cell = row.cells[col], v = cell ? cell.getAttribute("data-sort") : null;
        return v !== null ? parseFloat(v) : (cell ? cell.textContent.trim().toLowerCase() : "");
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var d = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
        return up ? d : -d;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});"""
