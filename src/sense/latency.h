/* PLACEHOLDER: replaced by the latency sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler latency_sampler;
