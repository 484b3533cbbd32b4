"""The viewer's endpoints: module-level Starlette endpoints, each reading the app's settings
from ``request.app.state`` (`web.context`), so that each can be served and tested alone.

- `listing`: the session list, as a page and as JSON;
- `search`: the search page and its JSON;
- `session`: a session's page, its state, timeline, full texts and export;
- `live`: the event stream of a session;
- `fork`: the one write.
"""
