// What a reader of a page cannot see or reach, measured in the page by the browser's own
// layout: run by tests/engine_browser.py in every page and frame of the report. Returns one
// sentence per problem; an empty list is a page laid out as it should be.
() => {
  const problems = [];
  const name = (el) => {
    const text = (el.innerText || el.alt || "").trim().replace(/\s+/g, " ").slice(0, 40);
    const id = el.id ? `#${el.id}` : "";
    const cls = el.classList.length ? `.${[...el.classList].slice(0, 2).join(".")}` : "";
    return `<${el.tagName.toLowerCase()}${id}${cls}>${text ? ` "${text}"` : ""}`;
  };
  // What the reader sees of the page, less the report's own menu (a nav, and the fixed
  // button that brings it back): a closed <details> hides its content without display:none.
  const chrome = (el) => {
    for (let up = el; up; up = up.parentElement) {
      if (up.tagName === "NAV" || getComputedStyle(up).position === "fixed") return true;
    }
    return false;
  };
  const shown = (el) => {
    const rect = el.getBoundingClientRect();
    return el.checkVisibility({ visibilityProperty: true }) && rect.width > 0 && rect.height > 0
      && !chrome(el);
  };
  const scrolls = (style) => ["auto", "scroll"].includes(style.overflowX);
  const elements = [...document.body.querySelectorAll("*")].filter(shown);

  // Content wider than its box: past a box that clips or shows it, the reader loses it.
  // A box that scrolls keeps it reachable; inline boxes and table parts take their width
  // from their table, which is measured itself.
  for (const el of elements) {
    const style = getComputedStyle(el);
    if (style.display.startsWith("inline") || style.display.startsWith("table-") || scrolls(style)) {
      continue;
    }
    const spill = el.scrollWidth - el.clientWidth;
    if (spill > 1) {
      problems.push(`the content of ${name(el)} is ${spill} px wider than its box`);
    }
  }

  // Boxes drawn over each other: the later one covers the earlier.
  const boxes = elements.filter((el) =>
    ["TABLE", "IMG", "SVG", "PRE", "P", "H1", "H2", "H3", "H4", "IFRAME", "DETAILS", "FIGURE"]
      .includes(el.tagName.toUpperCase()));
  const rects = boxes.map((el) => el.getBoundingClientRect());
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      if (boxes[i].contains(boxes[j]) || boxes[j].contains(boxes[i])) continue;
      const a = rects[i], b = rects[j];
      const width = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const height = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (width > 1 && height > 1) {
        problems.push(`${name(boxes[i])} and ${name(boxes[j])} overlap by ${Math.round(width)}x${Math.round(height)} px`);
      }
    }
  }

  // Left of the page's origin, or of a scrolling box's, nothing can scroll to it (a centred
  // flex item wider than its container spills there).
  const origin = document.documentElement.getBoundingClientRect().left;
  for (const el of boxes) {
    let edge = origin;
    for (let up = el.parentElement; up; up = up.parentElement) {
      if (scrolls(getComputedStyle(up))) {
        edge = up.getBoundingClientRect().left;
        break;
      }
    }
    const cut = edge - el.getBoundingClientRect().left;
    if (cut > 1) problems.push(`${name(el)} starts ${Math.round(cut)} px left of where scrolling reaches`);
  }

  for (const img of document.querySelectorAll("img")) {
    if (!img.complete || img.naturalWidth === 0) problems.push(`${name(img)} did not load`);
  }

  // A link inside the report: an anchor of this page, or a data: URI the report carries.
  for (const a of document.querySelectorAll("a[href]")) {
    const href = a.getAttribute("href");
    if (href === "#" || href.startsWith("data:") || /^(https?|mailto):/.test(href)) continue;
    if (href.startsWith("#")) {
      if (!document.getElementById(decodeURIComponent(href.slice(1)))) {
        problems.push(`the link ${name(a)} points to ${href}, which is not on the page`);
      }
    } else {
      problems.push(`the link ${name(a)} points to ${href}, which the report does not carry`);
    }
  }
  return problems;
}
