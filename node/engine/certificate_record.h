// How the consensus engine writes a certificate into a task record. Decisions about one task
// can be carried out by different threads, so their record writes may land in any order; each
// write is defined so that every order ends in the same record.
#pragma once

#include <cstdint>

#include "consensor/v1/node.pb.h"

namespace consensor::node {

// Stores `certificate` with the task's request (which hashes to the signed task id, so a
// verifier takes replicas, quorum and protocol version from what the signatures cover).
void StoreCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task);

// The committee's first certificate: stored unless one is already there (a refreshed or a
// dispute certificate may have landed first, and it supersedes this one).
void StoreFirstCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task);

// The same result re-signed without an equivocator: replaces a committee certificate of the same
// result, or comes first; never replaces a dispute certificate or another result's.
void StoreRefreshedCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task);

}  // namespace consensor::node
