"""`looks_like_tool_error`: tool results that report a failure, and data that only mentions errors."""

import pytest

from tracing_eval.tool_results import looks_like_tool_error


@pytest.mark.parametrize(
    "result",
    [
        "Error: order not found",
        {"error": "not found"},
        '{"success": false, "message": "Card declined"}',
        {"ok": False, "reason": "quota"},
        '{"status": "FAILED"}',
        {"status_code": 503, "detail": "busy"},
        '{"statusCode": 404}',
        '{"errorMessage": "Invalid token"}',  # AWS Lambda
        {"isError": True, "content": [{"type": "text", "text": "boom"}]},  # an MCP tool result
        "HTTP 500 Internal Server Error",
        "Request failed with status code 429",
        "Tool execution failed: connection refused",
        "Permission denied",
        "KeyError: 'order_id'",  # a Python exception line
        'Traceback (most recent call last):\n  File "tool.py", line 3\nValueError: bad id',
        '{"detail": "Not Found"}',  # a web framework's error body
        {"message": "Internal server error"},
        "Rate limit exceeded",
        "Access denied",
        "Unknown error",
        "1 validation error for BookFlight\nflight_id\n  Field required",  # the tool's arguments rejected
        "Could not find a reservation with ID ABC123",
        "Unable to process the request",
        "Failed to fetch the weather for Paris",
        # network errors of Node.js, Python, Go and proxies
        "connect ECONNREFUSED 127.0.0.1:5432",
        "getaddrinfo ENOTFOUND api.example.com",
        "connect ETIMEDOUT 10.0.0.5:443",
        "read ECONNRESET",
        "TypeError: fetch failed",
        "Error: socket hang up",
        "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
        "no healthy upstream",
        "502 Bad Gateway",
        "504 Gateway Time-out",
        "Request timed out",
        "context deadline exceeded",
        "dial tcp 127.0.0.1:6379: connect: connection refused",
        "HTTPSConnectionPool(host='api.example.com', port=443): Max retries exceeded with url: /v1/orders/991 "
        "(Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f3a>: Failed to establish "
        "a new connection: [Errno 111] Connection refused'))",
        "curl: (6) Could not resolve host: api.example.com",
        "page.goto: net::ERR_NAME_NOT_RESOLVED at https://shop.example",
        "locator.click: Timeout 30000ms exceeded.",
        "SSL: CERTIFICATE_VERIFY_FAILED",
        # gRPC
        "14 UNAVAILABLE: No connection established",
        "4 DEADLINE_EXCEEDED: Deadline exceeded",
        "rpc error: code = Unavailable desc = connection error",
        # a short apology or outage notice from a service
        "Sorry, the refund service is currently unavailable.",
        "The weather API is temporarily unavailable. Please try again later.",
        "Timeout",
        "Failed.",
        # JSON error bodies of well-known APIs
        '{"ok": false, "error": "channel_not_found"}',  # Slack
        '{"data": null, "errors": [{"message": "Cannot query field \\"foo\\" on type \\"Query\\"."}]}',  # GraphQL
        '{"detail": "Not authenticated"}',  # FastAPI 401
        '{"detail": [{"loc": ["body", "order_id"], "msg": "field required", "type": "value_error.missing"}]}',
        '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',  # Anthropic
        '{"content": [{"type": "text", "text": "Unknown tool: serch"}], "isError": true}',  # MCP
        '{"content": [{"type": "text", "text": "Error: order 991 not found"}]}',  # MCP without isError
        '[{"type": "text", "text": "Error: order 991 not found"}]',  # text blocks
        '{"output": "Error: order 991 not found"}',
        '{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}',
        '{"Message": "User is not authorized to access this resource"}',  # AWS API Gateway
        '{"Error": {"Code": "NoSuchBucket", "Message": "The specified bucket does not exist"}}',
        '{"fault": {"faultstring": "Invalid ApiKey", "detail": {"errorcode": "oauth.v2.InvalidApiKey"}}}',
        '{"errno": -111, "code": "ECONNREFUSED", "syscall": "connect", "address": "127.0.0.1", "port": 5432}',
        '{"error": {"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}}',
        # HTML and XML error pages
        "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center></body></html>",
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchKey</Code><Message>The specified key does not'
        " exist.</Message></Error>",
        # exceptions and crashes of Python, Java and Go
        'Traceback (most recent call last):\n  File "tool.py", line 3, in <module>\n    run()\nNameError: x',
        '  File "tool.py", line 1\n    foo(\n       ^\nSyntaxError: unexpected EOF while parsing',
        'Exception in thread "main" java.lang.NullPointerException\n\tat com.example.Main.main(Main.java:5)',
        'java.lang.NullPointerException: Cannot invoke "String.length()" because "s" is null',
        "java.lang.NullPointerException\n\tat com.example.Main.main(Main.java:5)",
        "panic: runtime error: index out of range [5] with length 3\n\ngoroutine 1 [running]:\nmain.main()",
        "sqlite3.OperationalError: no such table: orders",
        "(sqlite3.OperationalError) no such table: orders",
        'psycopg2.errors.UndefinedTable: relation "orders" does not exist',
        "ValueError('bad id')",
        "search() missing 1 required positional argument: 'query'",
        "'NoneType' object has no attribute 'get'",
        "Cannot read properties of undefined (reading 'id')",
        # shells, databases, package managers
        "ls: cannot access '/data/report.csv': No such file or directory",
        "fatal: not a git repository (or any of the parent directories): .git",
        "npm ERR! code E404",
        "Process exited with code 127",
        "ERR unknown command 'FOO'",
        'ERROR:  relation "users" does not exist',
        'syntax error at or near "FROM"',
    ],
)
def test_a_tool_result_that_reads_as_a_failure(result: object) -> None:
    assert looks_like_tool_error(result)


@pytest.mark.parametrize(
    "result",
    [
        '{"status": "shipped", "note": "on its way"}',
        {"status": 200, "data": []},
        {"success": True},
        {"result": None, "error": None},
        {"isError": False, "content": []},
        {"errors": []},
        {"status": True},
        "10 passed, 0 failed",
        "Found 3 flights.",
        {"message": "Order cancelled"},
        {"order_id": "W1", "items": [], "total": 3, "message": "2 items invalid for return"},  # a record, not a body
        "No errors found.",
        "Errors: none",
        '{"note": "we could not find your bag at first, it is now on its way"}',
        "Validation passed for 3 fields",
        # log lines a log-search tool returned
        "2024-05-01 12:00:01 ERROR payment timeout order=991",
        "2024-05-01T12:00:01Z ERROR payment-svc connection refused\n2024-05-01T12:00:02Z INFO retry ok",
        "[ERROR] 2024-05-01 12:00:01 payment timeout order=991",
        "May  1 12:00:01 host sshd[12]: Connection closed by 10.0.0.1",
        'ts=2024-05-01T12:00:01Z level=error msg="connection refused"',
        '{"level": "error", "msg": "payment timeout", "ts": 1714564801}',
        '[{"timestamp": "2024-05-01T12:00:01Z", "level": "ERROR", "message": "payment timeout"}]',
        # data that counts or lists errors
        '{"error_count": 0}',
        '{"errors": []}',
        '{"error": null}',
        '{"error": "none"}',
        '{"errcode": 0, "errmsg": "ok"}',
        '{"error_code": "E1001", "description": "Invalid card number"}',  # a docs lookup
        "Error codes: 400 Bad Request, 401 Unauthorized, 404 Not Found",
        "Error codes:\n- 400 Bad Request: the request was invalid\n- 404 Not Found",
        '[{"code": 400, "name": "Bad Request"}, {"code": 404, "name": "Not Found"}]',
        "id,timestamp,error\n1,2024-05-01,timeout\n2,2024-05-02,",
        "error,count\nECONNREFUSED,3\nnot found,2",
        "| id | error |\n|----|-------|\n| 1  | timeout |",
        "[(1, 'timeout'), (2, 'connection refused')]",
        "error.log\nerror_handler.py\nREADME.md",
        # search results and pages that talk about errors
        "Title: How to fix 'connection refused' errors in PostgreSQL\nURL: https://example.com/pg",
        "1. Fixing 'connection refused' in Docker\n2. ECONNREFUSED explained",
        "# Troubleshooting\n\nIf you see `connection refused`, restart the server.",
        "<html><head><title>How to fix 404 Not Found</title></head><body>...</body></html>",
        "<html><head><title>Error handling - MDN</title></head><body>...</body></html>",
        # tickets titled with an error
        '[{"id": "T-1", "title": "Login error", "status": "open"}, {"id": "T-2", "title": "Payment failed"}]',
        '{"tickets": [{"id": 881, "subject": "Login error"}]}',
        "Ticket 881: 'Login error' (open, priority high)",
        # headings and counts that open with an error word
        "Error rate last hour: 0.2%",
        "Error handling in Python - Real Python",
        "Exception handling best practices",
        "Failed payments today: 3",
        "FAILED: 0, PASSED: 12",
        "Failure modes of distributed systems",
        "Traceback analysis complete: no issues",
        "Error-free run",
        "Timeout set to 30 seconds.",
        "Timeout: 30 seconds (default)",
        # results that say the call did its job
        '{"content": [{"type": "text", "text": "Found 3 results"}]}',
        '{"output": "Found 3 results"}',
        '{"content": [{"type": "text", "text": "Error: boom"}], "isError": false}',  # the server says it is not
    ],
)
def test_a_tool_result_that_does_not_read_as_a_failure(result: object) -> None:
    assert not looks_like_tool_error(result)


def test_a_result_wrapped_without_end_is_read_a_few_levels_deep() -> None:
    nested: object = "Error: boom"
    for _ in range(3):
        nested = {"output": nested}
    assert looks_like_tool_error(nested)
    for _ in range(5000):  # deeper than the recursion limit: read a few levels, then given up
        nested = {"output": nested}
    assert not looks_like_tool_error(nested)
