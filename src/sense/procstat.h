/* PLACEHOLDER: replaced by the procstat sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler procstat_sampler;
