// Collections kept live: a map of a family's resources by id, changed by /v3/subscribe's
// events of that family. Pure: pages and their tests share it.

/** One message of /v3/subscribe. */
export interface ResourceEvent {
  name: string;
  resourceType?: string;
  data?: { id?: string } & Record<string, unknown>;
}

export interface Resource {
  id: string;
  links?: Record<string, string>;
  actions?: Record<string, string>;
}

/** The resources after `event`: the same map when the event is of another family, or of a
 * resource `belongs` leaves out (another cluster's node). */
export function applyResourceEvent<T extends Resource>(
  resources: ReadonlyMap<string, T>,
  event: ResourceEvent,
  resourceType: string,
  belongs: (resource: T) => boolean = () => true,
): ReadonlyMap<string, T> {
  const data = event.data as T | undefined;
  if (event.resourceType !== resourceType || typeof data?.id !== "string" || !belongs(data)) {
    return resources;
  }
  const next = new Map(resources);
  if (event.name === "resource.remove") {
    if (!next.delete(data.id)) return resources;
  } else if (event.name === "resource.create" || event.name === "resource.change") {
    next.set(data.id, data);
  } else {
    return resources;
  }
  return next;
}

export function byId<T extends Resource>(resources: T[]): ReadonlyMap<string, T> {
  return new Map(resources.map((r) => [r.id, r]));
}

/** The failure's words for the page: the API's message, else what the browser said. */
export function messageOf(failure: unknown): string {
  return failure instanceof Error ? failure.message : String(failure);
}
