// The live parts of a page: each element with data-live opens that event stream and takes
// the HTML of each "update" event in place (the server sends it only when it changed).
"use strict";
document.querySelectorAll("[data-live]").forEach((element) => {
  const stream = new EventSource(element.dataset.live);
  stream.addEventListener("update", (event) => {
    element.innerHTML = event.data;
    element.dataset.updates = String(Number(element.dataset.updates || "0") + 1);
  });
});
