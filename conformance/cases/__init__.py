"""The conformance cases: ``test_<family>.py`` modules, one test per catalogue row.

A case is a test bound to its row of :mod:`conformance.catalogue` with ``@case``; keyword
arguments are the world's options for this case. It says expected vs actual with ``expect``
(or raises ``CaseFailed``) and quotes the exchange that shows it, in the one witness format of
:mod:`conformance.witness`::

    from conformance.marks import case
    from conformance.verdict import expect
    from conformance.witness import witness

    @case("GEN-003", hermes_script="one-prompt")
    async def test_stale_epoch_result_is_refused(world):
        ...
        expect(resp.status == 409, expected="409 runner_epoch_stale",
               actual=f"{resp.status} {resp.body}", witness=witness(world, last=2))

The feature a case needs is the row's ``feature``; the plugin deselects it outside the chosen
profile and ends it not-applicable when the runner does not advertise a wire feature.

Files: ``test_<family>.py``, split by concern as ``test_<family>_<concern>.py`` once a family
passes ~400 lines; a family's 9NN cases (the spec-coverage sweep) sit with the others. Each
case's docstring says ``fails when:`` and names, in parentheses, the negative controls that show
it (``(claim-upserts)``): each named control declares the case in its registry row, so the
negative-control self-test proves the claim (``tests/test_fails_when.py``).
"""
