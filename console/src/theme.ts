// Light and dark themes: the system's choice until the user picks one, which is remembered.

export type Theme = "light" | "dark";

const KEY = "corral.theme";

export function initialTheme(stored: string | null, prefersDark: boolean): Theme {
  if (stored === "light" || stored === "dark") return stored;
  return prefersDark ? "dark" : "light";
}

export function currentTheme(): Theme {
  return initialTheme(
    localStorage.getItem(KEY),
    window.matchMedia("(prefers-color-scheme: dark)").matches,
  );
}

export function applyTheme(theme: Theme, remember: boolean): void {
  document.documentElement.dataset.theme = theme;
  if (remember) localStorage.setItem(KEY, theme);
}
