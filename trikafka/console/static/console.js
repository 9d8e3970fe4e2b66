// The console's only script: re-fetch the live request-rate table every second and swap it
// in. The server renders (and escapes) the table; this only moves its HTML into the page.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const box = document.querySelector("[data-refresh]");
  if (!box) return;
  const url = box.dataset.refresh;
  let busy = false;
  setInterval(async () => {
    if (busy || document.hidden) return;
    busy = true;
    try {
      const answer = await fetch(url, { cache: "no-store" });
      if (answer.ok) {
        box.innerHTML = await answer.text();
        box.dataset.updated = String(Number(box.dataset.updated || 0) + 1);
      }
    } catch (e) {
      // the broker stopped or restarts: keep the last table, try again next second
    } finally {
      busy = false;
    }
  }, 1000);
});
