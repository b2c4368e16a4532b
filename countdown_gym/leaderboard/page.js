(function () {
  function key(cell, type) {
    var v = cell.getAttribute("data-sort");
    if (v === null) { v = cell.textContent.trim(); }
    if (type === "num") { var x = parseFloat(v); return isNaN(x) ? -Infinity : x; }
    return v.toLowerCase();
  }
  function sortTable(table, col, dir) {
    var heads = table.tHead.rows[0].cells, type = heads[col].getAttribute("data-type");
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], type), y = key(b.cells[col], type);
      var c = x < y ? -1 : x > y ? 1 : 0;
      return dir === "asc" ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[col].setAttribute("aria-sort", dir === "asc" ? "ascending" : "descending");
  }
  var tables = document.querySelectorAll("table.board");
  tables.forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (th, col) {
      th.addEventListener("click", function () {
        var now = th.getAttribute("aria-sort");
        sortTable(table, col, now === "ascending" ? "desc" : "asc");
      });
    });
  });
  var m = null;
  try { m = /^#sort=([^:]+):(asc|desc)$/.exec(decodeURIComponent(location.hash)); } catch (e) { /* a malformed %-escape: no sort */ }
  if (m) {
    tables.forEach(function (table) {
      var heads = table.tHead.rows[0].cells;
      for (var i = 0; i < heads.length; i++) {
        if (heads[i].getAttribute("data-column") === m[1]) { sortTable(table, i, m[2]); }
      }
    });
  }
  var box = document.getElementById("filter");
  box.addEventListener("input", function () {
    var q = box.value.toLowerCase();
    tables.forEach(function (table) {
      Array.prototype.forEach.call(table.tBodies[0].rows, function (r) {
        r.hidden = q !== "" && r.textContent.toLowerCase().indexOf(q) < 0;
      });
    });
  });
})();
