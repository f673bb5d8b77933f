/* PLACEHOLDER: replaced by the clock sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler clock_sampler;
