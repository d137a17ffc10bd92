"""The Evaluate call for plans of ours: a Plan or Replan answer predicted under the cost model
that made it (docs/API.md#evaluate, docs/COST_MODEL.md#breakdown-of-a-plan).

    import oobleck_planner

    with oobleck_planner.connect() as channel:
        planner = oobleck_planner.PlannerStub(channel)
        answer = planner.Plan(request, timeout=60)
        e = oobleck_planner.evaluate(planner, plan=answer, timeout=30)
        print(e.iteration_time_ms, e.bubbles_ms, list(e.unmodelled_fields))

The answer's `iteration_time_ms` is the one the Plan or Replan answer reported; parts the
cost model does not have are named in `unmodelled_fields` (their fields are 0 and mean
nothing). Errors are the service's, raised as grpc.RpcError.
"""

import json

from google.protobuf import json_format

from oobleck_planner.v1 import planner_pb2


def job_plan_request(plan):
    """The EvaluateRequest of `plan`: a PlanResponse or ReplanResponse message, a
    ReplanRequest or JobPlan (their `request` and `plan`), or such an answer as the dict or
    JSON text (`oobleck-plan plan --json`, json_format.MessageToJson) a client saved."""
    job = planner_pb2.JobPlan()
    if isinstance(plan, (planner_pb2.PlanResponse, planner_pb2.ReplanResponse,
                         planner_pb2.ReplanRequest, planner_pb2.JobPlan)):
        if not (plan.HasField("request") and plan.HasField("plan")):
            raise ValueError("plan has no `request` and `plan`: pass a Plan or Replan answer")
        job.request.CopyFrom(plan.request)
        job.plan.CopyFrom(plan.plan)
    else:
        if isinstance(plan, (str, bytes)):
            plan = json.loads(plan)
        if not isinstance(plan, dict) or "request" not in plan or "plan" not in plan:
            raise ValueError("plan has no \"request\" and \"plan\": pass a Plan or Replan "
                             "answer (a message, its dict or its JSON text)")
        json_format.ParseDict({"request": plan["request"], "plan": plan["plan"]}, job,
                              ignore_unknown_fields=True)  # answers of newer servers
    return planner_pb2.EvaluateRequest(job_plan=job)


def evaluate(planner, plan, timeout=None):
    """Evaluate of `plan` (see job_plan_request) on `planner`, a PlannerStub; returns the
    EvaluateResponse."""
    return planner.Evaluate(job_plan_request(plan), timeout=timeout)
