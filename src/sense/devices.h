/* PLACEHOLDER: replaced by the devices sampler. */
#pragma once

#include "sense/sample.h"
#include "sense/sampler.h"

extern const struct sampler devices_sampler;
