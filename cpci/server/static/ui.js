// cpci web UI: the pages work without this file. It adds one thing: typing in a table's
// filter box hides non-matching rows of the page at once (the form still filters all pages
// on the server when submitted), and ticking an outcome submits the filter form.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const input of document.querySelectorAll("input[data-filter-table]")) {
    const table = document.getElementById(input.dataset.filterTable);
    if (!table) continue;
    input.addEventListener("input", () => {
      const needle = input.value.trim().toLowerCase();
      for (const row of table.tBodies[0].rows) {
        const cell = row.querySelector("td.config");
        if (!cell) continue;
        row.hidden = needle !== "" && !cell.textContent.toLowerCase().includes(needle);
      }
    });
  }
  for (const box of document.querySelectorAll("form.filter input[type=checkbox]")) {
    box.addEventListener("change", () => box.form.submit());
  }
});
