"""A new process resuming an Agents SDK conversation from the store: runs turn 3 and prints
what the model was sent, as JSON."""

import asyncio
import json
import sys

from agents import Runner
from agents_script import PROMPTS, SCRIPT, ScriptedModel, agent

from todo_sessions.integrations.openai_agents import TodoSessionsSession


async def main(url: str, session_id: str) -> None:
    model = ScriptedModel(SCRIPT[5:])
    async with TodoSessionsSession(session_id, url) as session:
        result = await Runner.run(agent(model), PROMPTS[2], session=session)
    print(json.dumps({"input": model.inputs[0], "output": result.final_output}))


asyncio.run(main(sys.argv[1], sys.argv[2]))
