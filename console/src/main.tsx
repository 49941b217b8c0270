import { render } from "preact";

import { App } from "./App";
import "./styles.css";
import { applyTheme, currentTheme } from "./theme";

applyTheme(currentTheme(), false);
const root = document.getElementById("app");
if (root) render(<App />, root);
