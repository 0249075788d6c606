// asyncstatus console: the pages are complete without this script. It only
// (1) shows times in the viewer's time zone, keeping the UTC value on hover,
// and (2) keeps a page's live part current from the console's own event
// stream (same origin, authenticated by the session cookie).
"use strict";
(function () {
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) { return; }
      el.title = el.getAttribute("datetime") + " (UTC)";
      el.textContent = d.toLocaleString(undefined, {
        year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short"
      });
    });
  }

  function live(url) {
    var target = document.getElementById("live");
    if (!target || !window.EventSource) { return; }
    var es = new EventSource(url);
    es.addEventListener("fragment", function (ev) {
      var tpl = document.createElement("template");
      tpl.innerHTML = ev.data;
      localTimes(tpl.content);
      target.replaceChildren(tpl.content);
      // Marks that the live part now comes from the stream: until the first
      // fragment lands, a click may hit a button that is about to be replaced.
      target.setAttribute("data-streamed", "true");
      var part = target.querySelector("[data-terminal]");
      if (part && part.getAttribute("data-terminal") === "true") { es.close(); }
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    var url = document.body.getAttribute("data-live");
    if (url) { live(url); }
  });
})();
