#include "node/engine/certificate_record.h"

namespace consensor::node {

void StoreCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task) {
  v1::Certificate* stored = task->mutable_consensus()->mutable_certificate();
  *stored = certificate;
  *stored->mutable_request() = task->spec();
  task->mutable_consensus()->set_final_block(final_block);
}

void StoreFirstCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task) {
  if (!task->consensus().has_certificate()) StoreCertificate(certificate, final_block, task);
}

void StoreRefreshedCertificate(const v1::Certificate& certificate, uint64_t final_block, v1::Task* task) {
  if (task->consensus().has_certificate()) {
    const v1::Certificate& stored = task->consensus().certificate();
    if (stored.dispute() || stored.result_root() != certificate.result_root()) return;
  }
  StoreCertificate(certificate, final_block, task);
}

}  // namespace consensor::node
