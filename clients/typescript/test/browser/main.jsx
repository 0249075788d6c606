// The browser test's page: follows the request named in the page's URL
// (#url=...&token=...&transport=..., or key=... instead of token) with
// RequestProgress; "Stop following" unmounts it.
import { useState } from "react";
import { createRoot } from "react-dom/client";
import { RequestProgress } from "../../examples/react/RequestProgress.jsx";

const params = new URLSearchParams(location.hash.slice(1));
const transport = params.get("transport") === "poll" ? "poll" : "stream";

function App() {
  const [following, setFollowing] = useState(true);
  return (
    <main>
      {following && (
        <RequestProgress
          url={params.get("url") ?? ""}
          pollToken={params.get("token") ?? undefined}
          apiKey={params.get("key") ?? undefined}
          transport={transport}
        />
      )}
      <button onClick={() => setFollowing(false)}>Stop following</button>
    </main>
  );
}

const root = document.getElementById("root");
if (root) createRoot(root).render(<App />);
