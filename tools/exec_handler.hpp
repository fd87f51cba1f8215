// A command as the record handler (rsc-consume --exec, --exec-lines): any language can process
// records. The record goes to the command as one JSON object on a line:
//   {"shard":3,"id":"1700000000000-0","deliveries":1,"fields":{"key":"k1","seq":"42"}}
#pragma once

#include <string>

#include "member/record.hpp"

namespace rsc::tools {

std::string record_json(const member::Record& r);

// --exec CMD: `sh -c CMD` per record, the record on its stdin. Exit 0: done; exit 75
// (EX_TEMPFAIL): retry later (member::RetryLater); exit 65 (EX_DATAERR, the record itself is bad):
// dead-letter it now, without the retries (member::DeadLetterNow); any other status, or a signal:
// a failed attempt (std::runtime_error with the status and the end of its stderr).
constexpr int kExitRetryLater = 75;
constexpr int kExitDeadLetterNow = 65;
void run_per_record(const std::string& cmd, const member::Record& r);

// --exec-lines CMD: one long-lived `sh -c CMD` per worker thread, reading one record per line on
// stdin and answering one line per record on stdout: "ok" (done), "retry [why]" (retry later),
// "dead [why]" (member::DeadLetterNow), anything else a failed attempt. A command that exits is
// started again for the next record (the record it had fails).
void run_on_child(const std::string& cmd, const member::Record& r);

}  // namespace rsc::tools
