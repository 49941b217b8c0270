import { useEffect, useState } from "preact/hooks";

import { AccessPage } from "./AccessPage";
import { onSessionEnded } from "./api";
import { ClusterList } from "./ClusterList";
import { ClusterPage } from "./ClusterPage";
import { CreateCluster } from "./CreateCluster";
import { PodPage } from "./PodPage";
import { ProjectPage } from "./ProjectPage";
import { ProjectsPage } from "./ProjectsPage";
import { ProvidersPage } from "./ProvidersPage";
import { hrefOf, parseRoute, type Route } from "./route";
import { SignIn } from "./SignIn";
import { signOut, whoAmI, type User } from "./session";
import { applyTheme, currentTheme, type Theme } from "./theme";
import { WorkloadsPage } from "./WorkloadsPage";

type View =
  | { kind: "loading" }
  | { kind: "signed-out"; notice: string }
  | { kind: "signed-in"; user: User };

export const ENDED_NOTICE = "Your session has ended. Sign in again to continue.";

export function App() {
  const [view, setView] = useState<View>({ kind: "loading" });

  const check = async (notice: string) => {
    try {
      const user = await whoAmI();
      setView(user ? { kind: "signed-in", user } : { kind: "signed-out", notice });
    } catch {
      setView({ kind: "signed-out", notice: "corral cannot be reached; try again shortly." });
    }
  };

  useEffect(() => {
    void check("");
    return onSessionEnded(() => {
      setView((current) =>
        current.kind === "signed-in" ? { kind: "signed-out", notice: ENDED_NOTICE } : current,
      );
    });
  }, []);

  if (view.kind === "loading") {
    return (
      <p class="loading" role="status">
        Loading…
      </p>
    );
  }
  if (view.kind === "signed-out") {
    return <SignIn notice={view.notice} onSignedIn={() => void check("")} />;
  }
  return (
    <Shell
      user={view.user}
      onSignedOut={() => {
        setView({ kind: "signed-out", notice: "You have signed out." });
      }}
    />
  );
}

function Shell({ user, onSignedOut }: { user: User; onSignedOut: () => void }) {
  const [theme, setTheme] = useState<Theme>(currentTheme);
  const route = useRoute();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");

  const leave = async () => {
    setBusy(true);
    try {
      await signOut();
      onSignedOut();
    } catch (failure) {
      setError(failure instanceof Error ? failure.message : String(failure));
      setBusy(false);
    }
  };

  const toggleTheme = () => {
    const next: Theme = theme === "dark" ? "light" : "dark";
    applyTheme(next, true);
    setTheme(next);
  };

  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="topbar">
        <span class="brand">corral</span>
        <nav aria-label="Main">
          <a href={hrefOf({ page: "clusters" })} aria-current={route.page === "clusters" ? "page" : undefined}>
            Clusters
          </a>
          <a href={hrefOf({ page: "access", section: "tokens" })} aria-current={route.page === "access" ? "page" : undefined}>
            Access
          </a>
          <a
            href={hrefOf({ page: "providers" })}
            aria-current={route.page === "providers" ? "page" : undefined}
          >
            Sign-in providers
          </a>
        </nav>
        <span class="spacer-flex" />
        <button
          type="button"
          class="ghost"
          aria-pressed={theme === "dark"}
          onClick={toggleTheme}
        >
          Dark theme
        </button>
        <span class="user" data-testid="user">
          {user.name || user.username}
        </span>
        <button type="button" onClick={() => void leave()} disabled={busy}>
          {busy ? "Signing out…" : "Sign out"}
        </button>
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <main id="main" tabIndex={-1}>
        <Page route={route} />
      </main>
    </>
  );
}

function useRoute(): Route {
  const [route, setRoute] = useState<Route>(() => parseRoute(window.location.hash));
  useEffect(() => {
    const follow = () => {
      setRoute(parseRoute(window.location.hash));
    };
    window.addEventListener("hashchange", follow);
    return () => {
      window.removeEventListener("hashchange", follow);
    };
  }, []);
  return route;
}

function Page({ route }: { route: Route }) {
  // Keyed by the address, so going from one cluster to another starts the page afresh.
  switch (route.page) {
    case "clusters":
      return <ClusterList />;
    case "create-cluster":
      return <CreateCluster />;
    case "cluster":
      return <ClusterPage key={route.clusterId} clusterId={route.clusterId} />;
    case "projects":
      return <ProjectsPage key={route.clusterId} clusterId={route.clusterId} />;
    case "project":
      return <ProjectPage key={route.projectId} projectId={route.projectId} />;
    case "workloads":
      return <WorkloadsPage key={route.projectId} projectId={route.projectId} />;
    case "pod":
      return <PodPage key={`${route.projectId}/${route.podId}`} projectId={route.projectId} podId={route.podId} />;
    case "access":
      return <AccessPage section={route.section} />;
    case "providers":
      return <ProvidersPage />;
  }
}
