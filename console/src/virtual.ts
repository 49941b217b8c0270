// A Preact hook around TanStack's framework-free virtualizer: only the rows in view (and a few
// around them) are in the page, so a list of thousands scrolls like one of ten.

import {
  Virtualizer,
  elementScroll,
  observeElementOffset,
  observeElementRect,
  type VirtualItem,
} from "@tanstack/virtual-core";
import { useEffect, useLayoutEffect, useState } from "preact/hooks";
import type { RefObject } from "preact";

export interface Window {
  items: VirtualItem[];
  totalSize: number;
}

export function useVirtualRows(
  count: number,
  rowHeight: number,
  scroller: RefObject<HTMLElement>,
): Window {
  const [, setRenders] = useState(0);
  const [virtualizer] = useState(
    () =>
      new Virtualizer<HTMLElement, Element>({
        count,
        estimateSize: () => rowHeight,
        getScrollElement: () => scroller.current,
        observeElementRect,
        observeElementOffset,
        scrollToFn: elementScroll,
        overscan: 8,
        onChange: () => {
          setRenders((n) => n + 1);
        },
      }),
  );
  virtualizer.setOptions({ ...virtualizer.options, count });
  useLayoutEffect(() => virtualizer._didMount(), [virtualizer]);
  useEffect(() => {
    virtualizer._willUpdate();
  });
  return { items: virtualizer.getVirtualItems(), totalSize: virtualizer.getTotalSize() };
}
