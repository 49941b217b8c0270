import { useEffect, useState } from "preact/hooks";

import { call, type Collection } from "./api";
import type { V3User } from "./access";
import { GlobalRoleBindings } from "./GlobalRoleBindings";
import { hrefOf, type AccessSection } from "./route";
import { Settings } from "./Settings";
import { Tokens } from "./Tokens";
import { Users } from "./Users";

const TITLES: Record<AccessSection, string> = {
  tokens: "Tokens",
  users: "Users",
  globalrolebindings: "Global role bindings",
  settings: "Settings",
};

/** The Access area: the caller's tokens, users, global role bindings and settings, one tab
 * each. The Users tab is offered to those who may manage users, as the users collection says
 * (its `createTypes`); anyone else would find only themselves there. */
export function AccessPage({ section }: { section: AccessSection }) {
  const [managesUsers, setManagesUsers] = useState(false);
  useEffect(() => {
    call<Collection<V3User>>("GET", "/v3/users?limit=1").then(
      (users) => {
        setManagesUsers(users.createTypes?.user !== undefined);
      },
      () => {
        setManagesUsers(false);
      },
    );
  }, []);

  const tabs = (Object.keys(TITLES) as AccessSection[]).filter(
    (tab) => tab !== "users" || managesUsers || section === "users",
  );
  return (
    <section class="page" aria-labelledby="access-title">
      <header class="page-head">
        <h1 id="access-title">{TITLES[section]}</h1>
      </header>
      <nav aria-label="Access" class="tabs">
        {tabs.map((tab) => (
          <a key={tab} href={hrefOf({ page: "access", section: tab })}
            aria-current={tab === section ? "page" : undefined}>
            {TITLES[tab]}
          </a>
        ))}
      </nav>
      <Section key={section} section={section} />
    </section>
  );
}

function Section({ section }: { section: AccessSection }) {
  switch (section) {
    case "tokens":
      return <Tokens />;
    case "users":
      return <Users />;
    case "globalrolebindings":
      return <GlobalRoleBindings />;
    case "settings":
      return <Settings />;
  }
}
