"""moto's Step Functions, taught two things AWS does: run a published version, start a child.

moto 5.2.5 runs Amazon States Language (``execute_state_machine``) and publishes versions
(``create_state_machine``/``update_state_machine`` with ``publish``), but ``StartExecution`` on a
version ARN (``...:stateMachine:NAME:1``) fails inside moto (the version has no executions of its
own: ``AttributeError``). A pipeline run starts on the version its configuration compiled to, so
that a later version leaves it alone (docs/architecture.md, "Pipelines on Step Functions"): the
stand-in has to keep that promise. This patch starts such an execution as AWS does — it runs the
version's definition, is listed and described under the state machine (its ARN names the state
machine, not the version), and a start with the same name is idempotent for the same input while
it runs, else ``ExecutionAlreadyExists``.

A sub-pipeline is a child execution (``arn:aws:states:::states:startExecution.sync:2``); moto's
interpreter hands that task's parameters to boto3 as written (``StateMachineArn``: botocore wants
``stateMachineArn`` and fails), and hands the answers back as boto3 gives them (``executionArn``;
the finished child's ``output``, ``status``; dates as ``datetime`` that no execution output can
carry). The patch names them as the API does both ways (``ExecutionArn``, ``Output``), dates as
epoch seconds as AWS's JSON has them. The same for an AWS SDK integration's call to Step Functions
(``arn:aws:states:::aws-sdk:sfn:describeExecution``): its parameters and answer are PascalCase on
AWS, and moto passed them to botocore as written (``KeyError``).

A stage's failure is answered with SendTaskFailure: moto drops its ``cause`` on the way in, and
looks for the token among finished executions too (a second answer to a finished task is taken);
AWS keeps the cause and answers ``InvalidToken`` (or ``TaskTimedOut``). The patch does both. And
a task whose ``TimeoutSeconds`` ran out keeps its token in moto, which takes a late answer and
drops it; AWS answers ``TaskTimedOut``, as the patch makes moto do. StopExecution ends a run at
once on AWS; moto's leaves a run waiting on a task token running, which the patch ends. AWS takes
a heartbeat from any task waiting on its token; moto only from one with ``HeartbeatSeconds``, and
only once its heartbeat clock is set up, after its message was sent: the patch takes it. An
answer in that window waited out the task's ``HeartbeatSeconds`` in moto; the patch moves on.

Applied by :func:`squadron.adapters.moto_server.patch` and by the tests that use ``mock_aws``.
"""

from __future__ import annotations

import copy
import datetime
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

from moto.core.exceptions import AWSError
from moto.core.responses import ActionResult, EmptyResult
from moto.stepfunctions.models import StateMachineVersion
from moto.stepfunctions.parser.api import ExecutionStatus, InvalidExecutionInput, InvalidToken
from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import EvalTimeoutError
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk import (
    StateTaskServiceAwsSdk,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (
    StateTaskServiceSfn,
)
from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackConsumerTimeout, CallbackEndpoint
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.backend.execution import Execution
from moto.stepfunctions.parser.models import StepFunctionsParserBackend
from moto.stepfunctions.responses import StepFunctionResponse


def _on_versions(start: Any) -> Any:
    @functools.wraps(start)
    def start_execution(
        self: StepFunctionsParserBackend,
        state_machine_arn: str,
        name: str | None = None,
        execution_input: str | None = None,
        trace_header: str | None = None,
    ) -> Any:
        version = self.describe_state_machine(state_machine_arn)
        if not isinstance(version, StateMachineVersion):
            return start(self, state_machine_arn, name, execution_input, trace_header)
        source = self.describe_state_machine(version.source_arn)
        name = name or str(uuid.uuid4())
        text = "{}" if execution_input is None else execution_input
        try:
            json.loads(text)
        except ValueError as exc:
            raise InvalidExecutionInput(str(exc)) from exc
        existing = source._handle_name_input_idempotency(name, text)
        if existing is not None:
            return existing
        snapshot = copy.deepcopy(version, {id(version.executions): []})
        execution = Execution(
            name=name,
            sm_type=snapshot.sm_type,  # type: ignore[arg-type]
            role_arn=snapshot.roleArn,
            exec_arn=f"arn:{self.partition}:states:{self.region_name}:{self.account_id}:execution:{source.name}:{name}",
            account_id=self.account_id,
            region_name=self.region_name,
            state_machine=snapshot,  # type: ignore[arg-type]
            start_date=datetime.datetime.now(tz=datetime.UTC),
            cloud_watch_logging_session=None,
            input_data=text,
            trace_header=trace_header,
            activity_store={},
        )
        source.executions.append(execution)  # type: ignore[arg-type]
        execution.start()
        return execution

    return start_execution


#: StartExecution's parameters as a state writes them -> as botocore names them.
_START_PARAMETERS = {"StateMachineArn": "stateMachineArn", "Name": "name", "Input": "input"}


def _epoch(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime.datetime) else value


def _botocore_names(normalise: Any) -> Any:
    @functools.wraps(normalise)
    def normalised(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        normalise(self, parameters, *args, **kwargs)
        for written, named in _START_PARAMETERS.items():
            if written in parameters:
                parameters[named] = parameters.pop(written)

    return normalised


def _api_names(evaluate: Any) -> Any:
    @functools.wraps(evaluate)
    def evaluated(self: Any, env: Any, *args: Any, **kwargs: Any) -> None:
        evaluate(self, env, *args, **kwargs)
        answer = env.stack[-1]
        if isinstance(answer, dict):
            for key in list(answer):
                answer[key[:1].upper() + key[1:]] = _epoch(answer.pop(key))

    return evaluated


def _sdk_names(evaluate: Any) -> Any:
    """An AWS SDK integration's call to Step Functions as AWS makes it: the state names its
    parameters in PascalCase (``ExecutionArn``), which AWS maps to the API's camelCase, and reads
    the answer's fields in PascalCase (``Status``, ``Output``). moto passed them to botocore as
    written (a KeyError) and handed the answer back as botocore names it."""

    @functools.wraps(evaluate)
    def evaluated(self: Any, env: Any, **kwargs: Any) -> None:
        if self._get_boto_service_name() != "stepfunctions":
            evaluate(self, env, **kwargs)
            return
        parameters = kwargs.pop("normalised_parameters")
        named = {key[:1].lower() + key[1:]: value for key, value in parameters.items()}
        evaluate(self, env, normalised_parameters=named, **kwargs)
        answer = env.stack[-1]
        if isinstance(answer, dict):
            env.stack[-1] = {key[:1].upper() + key[1:]: _epoch(value) for key, value in answer.items()}

    return evaluated


def _json_dates(normalise: Any) -> Any:
    """A service's answer as a state sees it on AWS: dates as epoch seconds, keys as the API names
    them (``Output``, ``Status``: the child's DescribeExecution that ``.sync:2`` hands back)."""

    @functools.wraps(normalise)
    def normalised(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
        if isinstance(response, dict):
            for key in list(response):
                response[key[:1].upper() + key[1:]] = _epoch(response.pop(key))
        normalise(self, response, *args, **kwargs)

    return normalised


def _begun_only(get_executions: Any) -> Any:
    """Executions whose interpreter thread has begun. moto marks a run RUNNING before its thread
    makes the run's environment (``exec_worker.env`` is None until then), and every caller of
    ``_get_executions`` (an answer to a task, a heartbeat, a map run) reads that environment: an
    answer to one run's task given while another run's thread has not begun yet (two runs started
    by one event) failed with ``AttributeError``. A run not begun holds no token nor map run."""

    @functools.wraps(get_executions)
    def begun(self: Any, execution_status: Any = None) -> list[Any]:
        executions: list[Any] = get_executions(self, execution_status)
        return [e for e in executions if e.exec_worker is not None and e.exec_worker.env is not None]

    return begun


def _failure_of_running(send: Any) -> Any:
    @functools.wraps(send)
    def send_task_failure(self: Any, task_token: str, error: Any = None, cause: Any = None) -> Any:
        running = self._get_executions(ExecutionStatus.RUNNING)
        if not any(e.exec_worker.env.callback_pool_manager._pool.get(task_token) for e in running):
            raise InvalidToken()  # type: ignore[no-untyped-call]
        return send(self, task_token, error=error, cause=cause)

    return send_task_failure


def _timed_out_refuses(evaluate: Any) -> Any:
    """A task whose wait for its token ended without an answer (its ``TimeoutSeconds`` ran out)
    refuses a later answer, as AWS's ``TaskTimedOut``: moto keeps the token's endpoint, and takes
    a late SendTaskSuccess and loses it. Marked before the state's ``Catch`` moves the run on, so
    no later answer finds the endpoint open."""

    @functools.wraps(evaluate)
    def marked(self: Any, env: Any) -> None:
        try:
            evaluate(self, env)
        except EvalTimeoutError:
            token = (env.states.context_object.context_object_data.get("Task") or {}).get("Token")
            endpoint = env.callback_pool_manager.get(token) if token else None
            if endpoint is not None and endpoint.get_outcome() is None:
                endpoint.report(CallbackConsumerTimeout())
            raise

    return marked


def _stop_ends_waits(stop: Any) -> Any:
    """StopExecution ends the run at once, as on AWS: moto marks it stopped but leaves its thread
    waiting on a task token (the run RUNNING until an answer comes, if ever). The stopped run's
    open waits are released, so it ends ``ABORTED`` (with :func:`_stopped_stays_stopped`)."""

    @functools.wraps(stop)
    def stopped(self: Execution, *args: Any, **kwargs: Any) -> None:
        stop(self, *args, **kwargs)
        worker = self.exec_worker
        if worker is None or worker.env is None:
            return
        for endpoint in list(worker.env.callback_pool_manager._pool.values()):
            if endpoint.get_outcome() is None:
                endpoint.interrupt_all()

    return stopped


def _stop_with_reason(self: Any) -> Any:
    """moto's StopExecution handler, keeping the ``error`` and ``cause`` a running execution is
    stopped with (AWS's DescribeExecution shows them; moto drops them)."""
    arn = self._get_param("executionArn")
    running = self.stepfunction_backend.describe_execution(arn).exec_status == ExecutionStatus.RUNNING
    execution = self.stepfunction_backend.stop_execution(arn)
    if running:
        for field in ("error", "cause"):
            if self._get_param(field) is not None:
                setattr(execution, field, self._get_param(field))
    return ActionResult({"stopDate": execution.stop_date})


def _stopped_stays_stopped(set_error: Any) -> Any:
    """A stopped run's released wait fails its task on the way out (moto reads no outcome as a
    timeout); the run stays stopped, as AWS's does, instead of failing with it."""

    @functools.wraps(set_error)
    def kept(self: Environment, *args: Any, **kwargs: Any) -> None:
        if isinstance(self.program_state(), ProgramStopped):
            return
        set_error(self, *args, **kwargs)

    return kept


class _TaskTimedOut(AWSError):
    """AWS's answer to a task token whose task timed out (moto's own cannot be raised: it has no
    message)."""

    TYPE = "TaskTimedOut"
    STATUS = 400


def _success_of_waiting(send: Any) -> Any:
    @functools.wraps(send)
    def send_task_success(self: Any, task_token: str, outcome: str) -> Any:
        for execution in self._get_executions(ExecutionStatus.RUNNING):
            endpoint = execution.exec_worker.env.callback_pool_manager.get(task_token)
            if endpoint is not None and isinstance(endpoint.consumer_error, CallbackConsumerTimeout):
                raise _TaskTimedOut("Task Timed Out")
        return send(self, task_token, outcome)

    return send_task_success


def _heartbeat_of_any_waiting_task(notify: Any) -> Any:
    """A heartbeat for any task that waits on its token is taken, as AWS takes it: moto takes one
    only once the task's heartbeat clock is set up, which is *after* its message was sent (a
    router that heartbeats as soon as it reads the message met ``InvalidToken`` in that window),
    and never from a task without ``HeartbeatSeconds``. Before the clock starts there is nothing
    for the heartbeat to reset."""

    @functools.wraps(notify)
    def taken(self: CallbackEndpoint) -> bool:
        if self.get_outcome() is not None:
            return False  # answered: over, as on AWS (``InvalidToken``)
        notify(self)
        return True

    return taken


def _clock_sees_an_earlier_answer(setup: Any) -> Any:
    """A task's heartbeat clock set up after its answer came ends the wait at once. moto's wait on
    a task with ``HeartbeatSeconds`` wakes only on a heartbeat, and an answer wakes the clock only
    if it exists: an answer given between the task's message and its clock (the router answering
    as soon as it reads the message) waited out ``HeartbeatSeconds``, where AWS moves on."""

    @functools.wraps(setup)
    def seen(self: CallbackEndpoint, heartbeat_seconds: int) -> Any:
        clock = setup(self, heartbeat_seconds)  # set before the outcome is read: no answer missed
        if self.get_outcome() is not None:
            clock.notify()
        return clock

    return seen


def _with_cause(self: Any) -> Any:
    """moto's SendTaskFailure handler, passing the ``cause`` on."""
    self.stepfunction_backend.send_task_failure(
        self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
    )
    return EmptyResult()


#: Set on each wrapper :func:`patch` installs: a second ``patch()`` wraps nothing twice.
_PATCHED = "_squadron_patched"


def _wrap_once(owner: Any, name: str, wrapper: Callable[[Any], Any]) -> None:
    """``owner.name`` replaced by ``wrapper(owner.name)``, unless a wrapper is there already."""
    current = getattr(owner, name)
    if getattr(current, _PATCHED, False):
        return
    wrapped = wrapper(current)
    setattr(wrapped, _PATCHED, True)
    setattr(owner, name, wrapped)


#: What :func:`patch` wraps: (owner, attribute, wrapper), each a way moto differs from AWS.
WRAPPERS: tuple[tuple[Any, str, Callable[[Any], Any]], ...] = (
    (StateTaskServiceSfn, "_normalise_parameters", _botocore_names),
    (StateTaskServiceSfn, "_eval_service_task", _api_names),
    (StateTaskServiceSfn, "_normalise_response", _json_dates),
    (StateTaskServiceAwsSdk, "_eval_service_task", _sdk_names),
    (StepFunctionsParserBackend, "_get_executions", _begun_only),
    (StepFunctionsParserBackend, "send_task_failure", _failure_of_running),
    (StepFunctionsParserBackend, "send_task_success", _success_of_waiting),
    (StepFunctionsParserBackend, "start_execution", _on_versions),
    (ExecutionState, "_evaluate_with_timeout", _timed_out_refuses),
    (CallbackEndpoint, "notify_heartbeat", _heartbeat_of_any_waiting_task),
    (CallbackEndpoint, "setup_heartbeat_endpoint", _clock_sees_an_earlier_answer),
    (Execution, "stop", _stop_ends_waits),
    (Environment, "set_error", _stopped_stays_stopped),
)


def patch() -> None:
    """Let ``StartExecution`` take a version ARN, and a state start a child execution (idempotent);
    and the rest of :data:`WRAPPERS` (idempotent: a second call changes nothing)."""
    for owner, name, wrapper in WRAPPERS:
        _wrap_once(owner, name, wrapper)
    StepFunctionResponse.send_task_failure = _with_cause  # type: ignore[method-assign]
    StepFunctionResponse.stop_execution = _stop_with_reason  # type: ignore[method-assign]
