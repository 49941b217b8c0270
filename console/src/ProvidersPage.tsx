// Access → Sign-in providers (`#/access/providers`): each provider's state, enable and disable,
// and an OpenID Connect provider's configuration, all through `/v3/authConfigs`, which shows
// administrators every provider and anyone else none.

import { useEffect, useState } from "preact/hooks";
import type { TargetedSubmitEvent } from "preact";

import { ApiError, all, call, pathOf } from "./api";
import { useAction } from "./live";
import {
  OIDC_FIELDS,
  OIDC_LABELS,
  OIDC_PROVIDERS,
  oidcBody,
  oidcErrorInput,
  oidcForm,
  oidcInput,
  providerName,
  type AuthConfig,
  type OidcField,
  type OidcForm,
} from "./providers";

export function ProvidersPage() {
  const [configs, setConfigs] = useState<AuthConfig[] | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const { pending, error, run } = useAction();

  const load = async () => {
    setConfigs(await all<AuthConfig>("/v3/authConfigs"));
  };
  useEffect(() => {
    void run("Loading…", load);
  }, []);

  const act = async (label: string, link: string, body: unknown) => {
    await run(label, async () => {
      await call("POST", pathOf(link), body);
      await load();
    });
  };

  const shown = editing === null ? undefined : configs?.find((c) => c.id === editing);
  return (
    <section class="page" aria-labelledby="providers-title">
      <nav aria-label="Breadcrumb" class="crumbs">
        <span>Access</span> / <span>Sign-in providers</span>
      </nav>
      <header class="page-head">
        <h1 id="providers-title">Sign-in providers</h1>
      </header>
      {pending && <p role="status">{pending}</p>}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {configs !== null && configs.length === 0 && (
        <p class="empty">Only administrators see and change the sign-in providers.</p>
      )}
      {configs !== null && configs.length > 0 && (
        <table class="grid" data-testid="providers">
          <thead>
            <tr>
              <th scope="col">Provider</th>
              <th scope="col">State</th>
              <th scope="col">Redirect URI to register with it</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {configs.map((config) => {
              const name = providerName(config.id);
              const enabled = config.enabled === true;
              const oidc = OIDC_PROVIDERS.has(config.id);
              return (
                <tr key={config.id} data-provider={config.id}>
                  <th scope="row">
                    {name}
                    <small class="muted">{config.id}</small>
                    {config.issuer && <small class="muted">{config.issuer}</small>}
                  </th>
                  <td>
                    <span class={enabled ? "ok" : "muted"}>{enabled ? "Enabled" : "Disabled"}</span>
                  </td>
                  <td>{config.redirectUri ? <code>{config.redirectUri}</code> : "—"}</td>
                  <td class="actions">
                    {oidc && config.links?.update !== undefined && (
                      <button
                        type="button"
                        class="ghost"
                        aria-label={`Edit ${name}`}
                        aria-expanded={editing === config.id}
                        onClick={() => {
                          setEditing(editing === config.id ? null : config.id);
                        }}
                      >
                        Edit
                      </button>
                    )}
                    {oidc && !enabled && config.actions?.testAndApply !== undefined && (
                      <button
                        type="button"
                        aria-label={`Enable ${name}`}
                        disabled={pending !== null}
                        onClick={() =>
                          void act(`Trying ${name} and enabling it…`, config.actions?.testAndApply ?? "", {
                            oidcConfig: {},
                            enabled: true,
                          })
                        }
                      >
                        Enable
                      </button>
                    )}
                    {enabled && config.actions?.disable !== undefined && (
                      <button
                        type="button"
                        class="ghost"
                        aria-label={`Disable ${name}`}
                        disabled={pending !== null}
                        onClick={() => void act(`Disabling ${name}…`, config.actions?.disable ?? "", {})}
                      >
                        Disable
                      </button>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
      {configs?.some((c) => c.id === "github" && c.links?.update !== undefined) && (
        <p class="hint">
          GitHub is enabled through the API (<code>testAndApply</code> with a code from its authorize page); here it
          can be disabled.
        </p>
      )}
      {shown && (
        <OidcSettings
          key={shown.id}
          config={shown}
          onSaved={async () => {
            setEditing(null);
            await run("Loading…", load);
          }}
          onCancel={() => {
            setEditing(null);
          }}
        />
      )}
    </section>
  );
}

interface SettingsProps {
  config: AuthConfig;
  onSaved: () => Promise<void>;
  onCancel: () => void;
}

type Step = "test" | "save" | "enable";
const STEP_PROGRESS: Record<Step, string> = {
  test: "Testing…",
  save: "Saving…",
  enable: "Testing and enabling…",
};

/** An OpenID Connect provider's configuration: test it, save it, or test and enable it. */
function OidcSettings({ config, onSaved, onCancel }: SettingsProps) {
  const [form, setForm] = useState<OidcForm>(() => oidcForm(config));
  const [busy, setBusy] = useState<Step | null>(null);
  const [tested, setTested] = useState("");
  // The API's refusal: at the input its fieldName names, else above the form.
  const [failure, setFailure] = useState<{ input: string | null; message: string } | null>(null);
  const name = providerName(config.id);
  const titleId = `${config.id}-settings-title`;

  const send = async (step: Step) => {
    setBusy(step);
    setFailure(null);
    setTested("");
    const body = oidcBody(form);
    try {
      if (step === "test") {
        const found = await call<{ authorizationEndpoint?: string }>(
          "POST",
          pathOf(config.actions?.configureTest ?? ""),
          body,
        );
        setTested(`The issuer answered: sign-in at ${found.authorizationEndpoint ?? "?"}. Nothing was saved.`);
      } else {
        if (step === "save") await call("PUT", pathOf(config.links?.update ?? ""), body);
        else await call("POST", pathOf(config.actions?.testAndApply ?? ""), { oidcConfig: body, enabled: true });
        await onSaved();
        return;
      }
    } catch (refused) {
      const input = refused instanceof ApiError ? oidcErrorInput(config.id, refused.fieldName) : null;
      setFailure({ input, message: refused instanceof Error ? refused.message : String(refused) });
      if (input) document.getElementById(input)?.focus();
    }
    setBusy(null);
  };

  const submit = (event: TargetedSubmitEvent<HTMLFormElement>) => {
    event.preventDefault();
    void send("save");
  };

  const input = (field: OidcField) => {
    const id = oidcInput(config.id, field);
    const wrong = failure?.input === id;
    const hint = field === "clientSecret" || field === "scope" ? `${id}-hint` : "";
    const described = [wrong ? `${id}-error` : "", hint].filter(Boolean).join(" ");
    return (
      <div class="field" key={field}>
        <label for={id}>{OIDC_LABELS[field]}</label>
        <input
          id={id}
          type={field === "clientSecret" ? "password" : "text"}
          autoComplete={field === "clientSecret" ? "new-password" : "off"}
          value={form[field]}
          aria-invalid={wrong}
          aria-describedby={described || undefined}
          onInput={(e) => {
            setForm({ ...form, [field]: e.currentTarget.value });
          }}
        />
        {field === "clientSecret" && (
          <span class="hint" id={hint}>
            Write-only: never shown back. Leave it empty to keep the one stored.
          </span>
        )}
        {field === "scope" && (
          <span class="hint" id={hint}>
            Space-separated, with openid.
          </span>
        )}
        {wrong && (
          <span class="error field-error" id={`${id}-error`}>
            {failure.message}
          </span>
        )}
      </div>
    );
  };

  return (
    <form class="panel" aria-labelledby={titleId} onSubmit={submit} noValidate>
      <h2 id={titleId}>{name} settings</h2>
      {failure && failure.input === null && (
        <p class="error" role="alert">
          {failure.message}
        </p>
      )}
      {failure?.input && (
        <p class="visually-hidden" role="alert">
          {failure.message}
        </p>
      )}
      {OIDC_FIELDS.map(input)}
      <p role="status">{busy ? STEP_PROGRESS[busy] : tested}</p>
      <div class="buttons">
        <button type="button" class="ghost" onClick={onCancel}>
          Cancel
        </button>
        {config.actions?.configureTest !== undefined && (
          <button type="button" class="ghost" disabled={busy !== null} onClick={() => void send("test")}>
            Test
          </button>
        )}
        <button type="submit" class="ghost" disabled={busy !== null}>
          Save
        </button>
        {config.actions?.testAndApply !== undefined && (
          <button type="button" disabled={busy !== null} onClick={() => void send("enable")}>
            Test and enable
          </button>
        )}
      </div>
    </form>
  );
}
