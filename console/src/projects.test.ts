import { describe, expect, it } from "vitest";

import {
  bindingBody,
  containerField,
  errorInput,
  fieldId,
  memberOf,
  namespaceQuotaField,
  projectBody,
  projectQuotaField,
  quotaText,
} from "./projects";

describe("projects", () => {
  it("sends only what was typed, quotas as /v3 takes them", () => {
    const form = {
      [fieldId("name")]: " web ",
      [fieldId("description")]: "",
      [fieldId(projectQuotaField("limitsCpu"))]: "2",
      [fieldId(namespaceQuotaField("limitsCpu"))]: "500m",
      [fieldId(projectQuotaField("pods"))]: " ",
      [fieldId(containerField("requestsMemory"))]: "64Mi",
    };
    expect(projectBody("c-a", form)).toEqual({
      type: "project",
      clusterId: "c-a",
      name: "web",
      resourceQuota: { limit: { limitsCpu: "2" } },
      namespaceDefaultResourceQuota: { limit: { limitsCpu: "500m" } },
      containerDefaultResourceLimit: { requestsMemory: "64Mi" },
    });
    // An empty name goes to the API, which says what is wrong with it.
    expect(projectBody("c-a", {})).toEqual({ type: "project", clusterId: "c-a", name: "" });
  });

  it("finds the input each field error of the API names", () => {
    expect(errorInput("displayName")).toBe(fieldId("name"));
    expect(errorInput("name")).toBe(fieldId("name"));
    expect(errorInput("resourceQuota.limit.pods")).toBe(fieldId(projectQuotaField("pods")));
    expect(errorInput("namespaceDefaultResourceQuota.limit.limitsMemory")).toBe(
      fieldId(namespaceQuotaField("limitsMemory")),
    );
    expect(errorInput("namespaceDefaultResourceQuota")).toBe(fieldId(namespaceQuotaField("limitsCpu")));
    expect(
      errorInput("namespaceDefaultResourceQuota.limit", "project quota: pods: 1 namespace(s) x 20 = 20 exceeds the limit 10; limitsCpu: …"),
    ).toBe(fieldId(namespaceQuotaField("pods")));
    expect(errorInput("containerDefaultResourceLimit.requestsCpu")).toBe(fieldId(containerField("requestsCpu")));
    expect(errorInput("clusterId")).toBeNull();
    expect(errorInput("")).toBeNull();
  });

  it("puts a quota in a line", () => {
    expect(quotaText({ limitsCpu: "2", pods: "10" })).toBe("CPU limit 2, Pods 10");
    expect(quotaText(null)).toBe("–");
    expect(quotaText({})).toBe("–");
  });
});

describe("project members", () => {
  it("grants to a user by id, or to a provider's group by its principal", () => {
    expect(bindingBody("c-a:p-1", " u-abc12 ", "read-only")).toEqual({
      type: "projectRoleTemplateBinding", projectId: "c-a:p-1", roleTemplateId: "read-only", userId: "u-abc12",
    });
    expect(bindingBody("c-a:p-1", "oidc_group://admins", "project-member")).toEqual({
      type: "projectRoleTemplateBinding", projectId: "c-a:p-1", roleTemplateId: "project-member",
      groupPrincipalId: "oidc_group://admins",
    });
    expect(memberOf({ id: "b", groupPrincipalId: "oidc_group://admins" })).toBe("oidc_group://admins");
  });
});
