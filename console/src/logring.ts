// A followed log kept in the page: the last `capacity` lines and the line still being written.
// A log may run for days; the page holds a bounded tail of it, however much has streamed.

export const LOG_LINES = 1000;

export class LogRing {
  readonly capacity: number;
  private lines: string[] = [];
  private partial = "";
  private droppedLines = 0;

  constructor(capacity = LOG_LINES) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError("capacity must be a whole number above 0");
    this.capacity = capacity;
  }

  /** Adds text as it arrived: a chunk may end inside a line, which the next one finishes. */
  push(chunk: string): void {
    const pieces = (this.partial + chunk).split("\n");
    this.partial = pieces.pop() ?? "";
    for (const line of pieces) this.lines.push(line.endsWith("\r") ? line.slice(0, -1) : line);
    const over = this.lines.length - this.capacity;
    if (over > 0) {
      this.lines.splice(0, over);
      this.droppedLines += over;
    }
  }

  /** The lines kept, the unfinished one last (it counts towards the capacity too). */
  view(): string[] {
    if (!this.partial) return [...this.lines];
    const shown = [...this.lines, this.partial];
    return shown.length > this.capacity ? shown.slice(1) : shown;
  }

  /** How many lines have been let go to stay within the capacity. */
  get dropped(): number {
    return this.droppedLines;
  }
}
