"""Meta-tools for backends' questions: list and answer elicitations and sampling, resume a saga."""

from __future__ import annotations

from typing import Any

from emceepee_cli.calls.call import WorkingTask
from emceepee_cli.questions.answers import sampling_answer
from emceepee_cli.server.envelope import Reply
from emceepee_cli.server.meta_tools.registry import SERVER_FILTER, Call, Group, Payload
from emceepee_cli.session.wiring import Services

group = Group()

REQUEST_ID = {"type": "string", "description": "The request_id (or a unique prefix of it)."}


@group.tool(
    "get_elicitations",
    "List the questions backend servers are waiting on the user for (elicitations): message, "
    "the schema of the expected answer (or a URL to open), server and task: all of them (a reply's "
    "pending_client_action carries only the newest 5). Answer with respond_to_elicitation.",
    {"server": SERVER_FILTER},
)
async def get_elicitations(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return {"elicitations": services.questions.listed("elicitation", args.get("server"))}


@group.tool(
    "respond_to_elicitation",
    "Answer a backend's question. action 'accept' with `content` matching the question's requested_schema "
    "(checked; a wrong field is named and the question stays open), or 'decline' / 'cancel'. Ask the user "
    "unless the answer is already known from the conversation. An approval (purpose 'approval') you may "
    "decline; you may accept it only if its approval.by includes 'model' (by default the user approves).",
    {
        "request_id": REQUEST_ID,
        "action": {"type": "string", "enum": ["accept", "decline", "cancel"]},
        "content": {
            "type": "object",
            "description": "The answer's fields, for action 'accept' (form questions).",
        },
    },
    ("request_id", "action"),
    read_only=False,
)
async def respond_to_elicitation(services: Services, args: dict[str, Any], call: Call) -> Payload:
    answer: dict[str, Any] = {"action": args["action"]}
    if args["action"] == "accept":
        answer["content"] = args.get("content") or {}
    return {
        "answered": await services.questions.answer(
            args["request_id"], answer, by="model", kind="elicitation"
        )
    }


@group.tool(
    "get_sampling_requests",
    "List the LLM completions backend servers are waiting for (sampling requests), with their messages: "
    "all of them (a reply's pending_client_action carries only the newest 5). "
    "You may answer them yourself with respond_to_sampling.",
    {"server": SERVER_FILTER},
)
async def get_sampling_requests(services: Services, args: dict[str, Any], call: Call) -> Payload:
    return {"sampling_requests": services.questions.listed("sampling", args.get("server"))}


@group.tool(
    "respond_to_sampling",
    "Answer a backend's sampling request with the completion text (you are the LLM it asked for).",
    {
        "request_id": REQUEST_ID,
        "content": {"type": "string", "description": "The completion's text."},
        "model": {"type": "string", "description": "The model that wrote it (default 'unknown')."},
        "stop_reason": {"type": "string", "description": "e.g. endTurn, stopSequence, maxTokens."},
    },
    ("request_id", "content"),
    read_only=False,
)
async def respond_to_sampling(services: Services, args: dict[str, Any], call: Call) -> Payload:
    answer = sampling_answer(args["content"], args.get("model"), args.get("stop_reason"))
    return {
        "answered": await services.questions.answer(args["request_id"], answer, by="model", kind="sampling")
    }


@group.tool(
    "resume_tool",
    "Resume a suspended tool call (a task shown with a `saga`): give the saga_token and an answer "
    "for its steps — for an elicitation step `result` is {action, content} (or just the content, "
    "meaning accept); for a sampling step, the completion text; `error` (a message or {code, message, "
    "data}) instead refuses the step. An approval step (purpose 'approval') is declined {action: 'decline'} "
    "to skip the tool; it is accepted only by whom its approval.by names (by default the user, in their "
    "client or with `emceepee answer`; 'model' there lets you accept it). "
    "Waits (capped) for the next suspension or the result.",
    {
        "saga_token": {"type": "string", "description": "The saga_token, exactly as given."},
        "completed_steps": {
            "type": "array",
            "description": "Answers for the saga's steps; the steps answered before may be repeated as "
            "they were (the whole history), and are then left as they are.",
            "items": {
                "type": "object",
                "properties": {
                    "step_id": {"type": "string"},
                    "stepId": {"type": "string", "description": "The same as step_id."},
                    "result": {},
                    "error": {
                        "description": "Refuse the step: a message, or a JSON-RPC error object.",
                        "oneOf": [
                            {"type": "string"},
                            {
                                "type": "object",
                                "properties": {
                                    "code": {"type": "integer"},
                                    "message": {"type": "string"},
                                    "data": {},
                                },
                                "required": ["code", "message"],
                            },
                        ],
                    },
                },
                "anyOf": [{"required": ["step_id"]}, {"required": ["stepId"]}],
                "additionalProperties": False,
            },
        },
    },
    ("saga_token", "completed_steps"),
    read_only=False,
)
async def resume_tool(services: Services, args: dict[str, Any], call: Call) -> Payload:
    out = await services.tasks.resume(args["saga_token"], args["completed_steps"], call.relay)
    if isinstance(out, WorkingTask):
        state = "suspended again" if out.saga is not None else "still working"
        return Reply(out.payload(), f"Task {out.task['task_id']} is {state}.")
    return out
