/* A broker quota on a client id, for tests that need a Kafka topic which is
 * slow but does not refuse (a producer over its producer_byte_rate is
 * throttled by the broker, its deliveries succeed late). librdkafka 2.0.x
 * has no call for client quotas (AlterClientQuotas, KIP-546), so the
 * request is written here by hand, to the broker at h_bootstrap(). */
#ifndef TM_E2E_CLIENT_QUOTA_H
#define TM_E2E_CLIENT_QUOTA_H

/* Sets the producer_byte_rate quota of CLIENT_ID to BYTES_PER_S, or removes
 * it when BYTES_PER_S is negative. Fails the test on any error. */
void h_client_quota(const char *client_id, double bytes_per_s);

#endif
