/* PLACEHOLDER: replaced by the cpufreq sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler cpufreq_sampler;
